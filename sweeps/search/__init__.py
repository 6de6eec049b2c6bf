"""Search: which configs to try and when to stop a trial.

    params, constants = parse_space(cfg.experiment.search_space)   # sweeps.search.space
    scheduler = make_scheduler(cfg, sweep_dir)                     # sweeps.execution.tuner

``space`` turns the YAML search space into Tune's; ``schedulers`` are ASHA and FIFO whose
decisions survive a driver crash (a replayable log; ``asha`` is the rung logic); ``outcome``
says what a trial's end means (completed, stopped, error) for every reader.
"""
