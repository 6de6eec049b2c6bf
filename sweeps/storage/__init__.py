"""Sweep directories on object stores (``sweep.dir=s3://bucket/prefix``): where they live
(``location``), whether they can be written (``preflight``), and the object operations behind
``sweeps.files`` (``objects``)."""

from sweeps.storage.location import stand_in, uri_of

__all__ = ["stand_in", "uri_of"]
