"""The one adapter between sweeps and Ray's private API: a Ray upgrade touches this package alone.

    from sweeps._ray import compat
    compat.check()              # at sweep start: one line naming the Ray version and what changed

Every private Ray symbol, attribute, file format and environment variable sweeps relies on is
reached through a named function here, whose docstring names the upstream issue and the public
API to move to once Ray has one. ``compat.check()`` imports each of them and checks the
attributes and signatures the functions rely on; ``tests/unit/ray_adapter/test_ray_compat.py``
runs it in seconds without a cluster, so an incompatible Ray fails one fast test and one line
at startup, never a hang mid-sweep. Each module's first line says which internals it holds.
"""
