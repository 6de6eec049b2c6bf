"""The one adapter between sweeps and Ray's private API: a Ray upgrade touches this package alone.

    from sweeps._ray import compat
    compat.check()              # at sweep start: one line naming the Ray version and what changed

Every private Ray symbol, attribute, file format and environment variable sweeps relies on is
reached through a named function here, whose docstring names the upstream issue and the public
API to move to once Ray has one. ``compat.check()`` imports each of them and checks what would
stop, hang or silently misdirect a sweep; ``tests/unit/ray_adapter/test_ray_compat.py`` runs it
and the source-text checks in seconds without a cluster, so an incompatible Ray fails one fast
test, and a sweep in one line at startup. Each module's first line says which internals it holds.
"""
