"""Example training loops for the built-in experiments (copy one into your project to start).

``trainables.digits`` uses ``sweeps.TrialSession``, the short path. Any Ray Train per-worker
function ``fn(config)`` works as ``experiment.trainable`` too, unchanged: see the README's
"Your own training loop, in your own project".
"""
