"""Training functions of the wrong shape, for the config checks (never run)."""

NOT_A_FUNCTION = 3


def two_args(config, extra):  # noqa: ANN001, ANN201
    pass


def no_args():  # noqa: ANN201
    pass


def loader_without_args():  # noqa: ANN201
    pass
