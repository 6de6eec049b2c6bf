"""Sweep directories on object stores (``sweep.dir=s3://bucket/prefix``): where they live
(``location``), whether they can be written (``preflight``), and the object operations behind
``sweeps.files`` (``objects``)."""

from sweeps.storage.location import (
    display,
    filesystem,
    is_object_store,
    is_uri,
    remote_of,
    stand_in,
    storage_of,
    sweep_root,
    uri_of,
)

__all__ = ["display", "filesystem", "is_object_store", "is_uri", "remote_of", "stand_in",
           "storage_of", "sweep_root", "uri_of"]
