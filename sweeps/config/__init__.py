"""Config: what the user wrote, composed by Hydra and validated before anything starts.

    cfg = compose("digits", ["search.num_samples=4"])      # sweeps.config.compose
    validate(cfg)                                           # sweeps.config.validate

Its modules: docs/development.md#how-the-code-is-laid-out.
"""
