"""What a user's training loop touches: it runs in every Train worker (or inline rank).

    from sweeps import TrialSession, trial_context     # optional: any Ray Train loop runs as is

``context`` (``trial_context()``: the trial's id, run dir, budget, metric), ``session``
(``TrialSession``: restore, report, checkpoint in one call each), ``checkpoint`` (the
``checkpoint.pt`` format and ``load_model``), ``worker`` (the entry every rank calls the loop
through: the trial context set, the config keys read noted, running out of GPU memory noted in
``gpu_memory``). Low in the stack: it imports only ``sweeps.config``'s loader of user code and
the base modules (``protocol``, ``files``, ``errors``), so everything may import it.
"""
