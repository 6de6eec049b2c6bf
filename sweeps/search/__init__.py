"""Search: which configs to try and when to stop a trial.

    params, constants = parse_space(cfg.experiment.search_space)   # sweeps.search.space
    alg = make_search_alg(cfg, limit, params, warm)                 # sweeps.search.searchers
    scheduler = make_scheduler(cfg, sweep_dir, params)             # sweeps.driver.tuner

Its modules: docs/development.md#how-the-code-is-laid-out; besides them, ``moasha`` and
``moasha_scheduler`` are MO-ASHA (several objectives), ``budget`` counts what the sweep spent
against ``sweep.budget`` and ``budget_scheduler`` applies it around any scheduler.
"""
