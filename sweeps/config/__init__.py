"""Config: what the user wrote, composed by Hydra and validated before anything starts.

    cfg = compose("digits", ["search.num_samples=4"])      # sweeps.config.compose
    validate(cfg)                                           # sweeps.config.validate

``schema`` holds the typed sections (``sweep``, ``experiment``, ``search``, ...); ``validate``
checks every key and names the fix; ``search_path`` and ``overrides`` find the user's own
configs next to the built-in ones (``paths``); ``compose`` is the library entry point.
"""
