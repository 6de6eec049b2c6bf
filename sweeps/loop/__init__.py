"""What a user's training loop touches: it runs in every Train worker (or inline rank).

    from sweeps import TrialSession, trial_context     # optional: any Ray Train loop runs as is

Its modules: docs/development.md#how-the-code-is-laid-out. Low in the stack: it imports only
``sweeps.config``'s loader of user code and the base modules (``protocol``, ``files``,
``errors``), so everything may import it.
"""
