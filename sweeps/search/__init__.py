"""Search: which configs to try and when to stop a trial.

    params, constants = parse_space(cfg.experiment.search_space)   # sweeps.search.space
    alg = make_search_alg(cfg, limit, params, warm)                 # sweeps.search.searchers
    scheduler = make_scheduler(cfg, sweep_dir, params)             # sweeps.driver.tuner

``space`` turns the YAML search space into params (``conditions``: entries that exist only
under a choice of another); ``checks`` says what a search may do with them before Ray starts;
``searchers`` builds Tune's search algorithm (``optuna_space``, ``samplers``, ``grid``,
``warm_start``); ``schedulers`` are ASHA and FIFO, ``moasha_scheduler`` is MO-ASHA (several
objectives) and ``pbt`` is PBT, all with decisions that survive a driver crash (a replayable
log; ``asha`` and ``moasha`` are the rung logic); ``outcome`` says what a trial's end means
(completed, stopped, error) for every reader; ``budget`` counts what the sweep spent against
``sweep.budget`` and ``budget_scheduler`` applies it around any scheduler.
"""
