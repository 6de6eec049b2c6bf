"""A sweep directory's storage, local or on an object store (``sweep.dir=s3://bucket/prefix``);
its modules: docs/development.md#how-the-code-is-laid-out. No module outside this package and
``sweeps.files`` asks which kind a path is."""

from sweeps.storage.location import stand_in, uri_of

__all__ = ["stand_in", "uri_of"]
