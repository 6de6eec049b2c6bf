"""A sweep directory's storage, local or on an object store (``sweep.dir=s3://bucket/prefix``):
where it lives (``location``), whether it can be written (``preflight``, ``full``), the object
operations (``objects``) behind ``sweeps.files`` (single files) and ``trees`` (directories), the
journals (``journal``) and the driver's claim files (``claims``). No module outside this package
and ``sweeps.files`` asks which kind a path is."""

from sweeps.storage.location import stand_in, uri_of

__all__ = ["stand_in", "uri_of"]
