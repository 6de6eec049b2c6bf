"""Execution: from a validated config to Ray Tune trials running Ray Train workers.

    result = run_sweep(cfg)      # sweeps.execution.runner

``prepare`` checks inputs (Ray-free); ``ray_session`` starts or joins Ray; ``fit`` runs Tune;
``tuner`` builds it; ``trial_driver`` is one trial (a ``TorchTrainer`` run) and ``worker`` wraps
the user's loop on every Train worker (``context``, ``session``, ``checkpoint`` are what a loop
may use); ``clock``, ``report_bridge`` and ``report_log`` carry reports back to Tune;
``resources`` plans CPUs/GPUs; ``code_shipping`` ships user code to a cluster; ``unread``
warns about searched keys the loop never read.
"""
