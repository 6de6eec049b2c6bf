"""Is a URI sweep directory usable? One probe object, written, read back and deleted.

    python -m sweeps +experiment=digits sweep.dir=s3://bucket/sweeps/digits
    check_store("s3://bucket/sweeps/digits")   # ConfigError naming sweep.dir and the fix

Run by ``sweeps.driver.prepare`` before Ray starts and before anything is written. An object
store answers a read of a missing bucket with "not found", like an empty prefix, so only a
write tells a missing bucket, a read-only credential or a dead endpoint apart from an empty
sweep: the probe is written (and deleted) under the sweep directory. Each failure becomes one
line naming ``sweep.dir``, the endpoint and the fix. Credentials come from the standard chain
(pyarrow's: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE`` and
``~/.aws/credentials``, web identity, the instance role); they are never printed or stored.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from sweeps.errors import ConfigError
from sweeps.storage import objects
from sweeps.storage.location import filesystem, is_uri, remote_of, uri_of

__all__ = ["check_store", "check_writable", "endpoint_of", "KEY"]

KEY = "sweep.dir"
MAX_URI = 150  # longer, and the stand-in's name (base64 of the URI) passes 255 characters


def endpoint_of(uri: str) -> str:
    """The endpoint a URI reaches: its ``endpoint_override``, else ``AWS_ENDPOINT_URL``
    (``AWS_ENDPOINT_URL_S3``), else the provider's own.

    Example:
        >>> endpoint_of("s3://b/x?endpoint_override=127.0.0.1:9000&scheme=http")
        '127.0.0.1:9000'
    """
    parts = urlsplit(uri)
    override = parse_qs(parts.query).get("endpoint_override")
    if override:
        return override[0]
    if parts.scheme == "s3":
        return (os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
                or "AWS S3")
    return f"{parts.scheme}://{parts.netloc}"


def _has_aws_credentials() -> bool:
    """Whether the standard AWS chain finds credentials: botocore's own resolver where it is
    installed (it asks an instance's metadata service, 1 s at most), else the variables and
    files the chain reads."""
    with contextlib.suppress(ImportError):  # not installed: the variables and files below
        import botocore.session

        try:
            return botocore.session.Session().get_credentials() is not None
        except Exception:  # a broken profile: the chain found something it could not use
            return True
    env = os.environ
    if any(env.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                "AWS_CONTAINER_CREDENTIALS_FULL_URI")):
        return True
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() != "true":
        return True  # an instance role may answer; only the request tells
    files = [env.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials"),
             env.get("AWS_CONFIG_FILE", "~/.aws/config")]
    return any(os.path.isfile(os.path.expanduser(f)) for f in files)


def _reason(uri: str, exc: BaseException) -> tuple[str, str]:
    """(what went wrong, the fix) for a failed probe."""
    text = str(exc)
    where = endpoint_of(uri)
    bucket = uri.partition("://")[2].partition("/")[0].partition("?")[0]
    if "NO_SUCH_BUCKET" in text or "NoSuchBucket" in text:
        return (f"names bucket {bucket!r}, which does not exist at {where}",
                f"create it first (aws s3 mb s3://{bucket}), or point sweep.dir at a bucket "
                "that exists")
    if any(s in text for s in ("NETWORK_CONNECTION", "curlCode", "Couldn't connect",
                               "Connection refused", "resolve host", "Timeout")):
        return (f"could not be reached: nothing answered at {where}",
                "check AWS_ENDPOINT_URL (or the URI's endpoint_override) and that the store "
                "is running")
    if uri.startswith("s3://") and not _has_aws_credentials():
        return (f"could not be written: no AWS credentials were found ({where})",
                "export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run "
                "where an instance role applies")
    if any(s in text for s in ("INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH",
                               "InvalidAccessKeyId", "SignatureDoesNotMatch")):
        return (f"could not be written: the store at {where} refused the credentials",
                "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)")
    if "ACCESS_DENIED" in text or "AccessDenied" in text or "Forbidden" in text:
        return (f"could not be written: access denied at {where}",
                "use credentials that may write under that prefix")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return (f"could not be written ({first[:200]})",
            "check the URI, the endpoint and the credentials")


def check_store(uri: str) -> None:
    """Fail in one line unless ``uri`` names a sweep directory sweeps can write, read back and
    delete in; leaves nothing behind but the empty directory marker pyarrow writes.

    Example:
        >>> check_store("s3://AKIA:secret@bucket/x")
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: sweep.dir: 's3://***@bucket/x' carries credentials ...
    """
    parts = urlsplit(uri)
    if parts.username or parts.password:  # checked first: no message may show them
        shown = uri.replace(parts.netloc, "***@" + parts.netloc.rpartition("@")[2], 1)
        raise ConfigError(KEY, shown.partition("?")[0], "carries credentials (they would be "
                          "printed, and written to the sweep's config and MLflow)",
                          "take them out of the URI and export AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)")
    try:
        found = filesystem(uri)
    except OSError as exc:  # from_uri asks the store for the bucket's region: it can fail here
        rule, fix = _reason(uri, exc)
        raise ConfigError(KEY, uri.partition("?")[0], rule, fix) from None
    except Exception as exc:  # pyarrow: ArrowInvalid "Unrecognized filesystem type in URI"
        scheme = uri.partition("://")[0]
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "Unrecognized filesystem type" in message:
            raise ConfigError(KEY, uri, f"has the scheme {scheme}://, which pyarrow (Ray's storage "
                              "layer) does not know", "use s3://, gs://, abfs:// or hdfs://, a "
                              "local path, or a shared filesystem path") from None
        raise ConfigError(KEY, uri, f"is not a storage URI pyarrow accepts ({message[:200]})",
                          "write it as s3://bucket/prefix (options such as "
                          "?endpoint_override=host:port after it)") from None
    if found is None or not is_uri(uri):
        return
    fs, base = found
    if len(uri) > MAX_URI:
        raise ConfigError(KEY, uri.partition("?")[0], f"is {len(uri)} characters long, and "
                          f"sweeps names its files by it (at most {MAX_URI})",
                          "use a shorter prefix, or put the endpoint in AWS_ENDPOINT_URL")
    if not base.strip("/") or "/" not in base.strip("/"):
        raise ConfigError(KEY, uri, "is a whole bucket", "add a prefix for the sweep, e.g. "
                          f"{uri.rstrip('/')}/sweeps/<name>")
    probe = f"{base}/.sweeps-write-probe-{uuid.uuid4().hex[:8]}"
    try:
        objects.put(fs, probe, b"probe")
        if objects.get(fs, probe) != b"probe":
            raise OSError("the probe object read back differently")
        fs.delete_file(probe)  # (pyarrow leaves an empty directory marker, base/, behind)
    except Exception as exc:
        rule, fix = _reason(uri, exc)
        raise ConfigError(KEY, uri.partition("?")[0], rule, fix) from None


def check_writable(sweep_dir: Path) -> None:
    """Fail unless ``sweep_dir`` can be created and written, leaving nothing behind (on an
    object store: a probe object written, read back and deleted, ``sweeps.storage.preflight``)."""
    if remote_of(sweep_dir) is not None:
        check_store(uri_of(sweep_dir))
        return
    existing = sweep_dir
    while not existing.exists():
        existing = existing.parent
    fix = "set sweep.dir to a directory you can write, e.g. sweep.dir=outputs/my_sweep"
    if not existing.is_dir():
        raise ConfigError(KEY, str(sweep_dir), f"is inside {existing}, which is a file", fix)
    probe = existing / f".sweeps-write-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError("sweep.dir", str(sweep_dir),
                          f"is not writable ({exc.strerror or exc})", fix) from exc
