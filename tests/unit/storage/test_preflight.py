"""A URI sweep.dir is checked before anything starts: each bad input is one line naming
sweep.dir and the fix, against a real S3 endpoint (moto's server, authentication on)."""

from __future__ import annotations

import os
import time

import pytest

from sweeps.errors import ConfigError
from sweeps.storage.preflight import check_store


def test_a_writable_prefix_passes_and_leaves_nothing(moto_s3) -> None:
    check_store(f"s3://{moto_s3.BUCKET}/sweeps/ok")
    # pyarrow keeps an empty directory marker when it deletes the last object of a prefix
    assert set(moto_s3.keys("sweeps/ok")) <= {"sweeps/ok/"}


@pytest.mark.parametrize(("uri", "env", "message"), [
    ("s3://no-such-bucket/sweeps/x", {},
     "sweep.dir: 's3://no-such-bucket/sweeps/x' names bucket 'no-such-bucket', which does not "
     "exist at http://127.0.0.1:"),
    ("s3://{bucket}/sweeps/x", {"AWS_ACCESS_KEY_ID": "AKIANOTAKEY",
                                "AWS_SECRET_ACCESS_KEY": "wrong-secret-0123456789"},
     "refused the credentials; check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"),
    ("s3://{bucket}/sweeps/x", {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
                                "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
                                "AWS_CONFIG_FILE": "/nonexistent"},
     "could not be written: no AWS credentials were found"),
    ("s3://{bucket}/sweeps/x", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"},
     "could not be reached: nothing answered at http://127.0.0.1:1; check AWS_ENDPOINT_URL"),
    ("s3://{bucket}", {}, "is a whole bucket; add a prefix for the sweep"),
    ("s3://AKIAINURI:wrong-secret-0123456789@{bucket}/x", {},
     "sweep.dir: 's3://***@sweeps-test/x' carries credentials"),
    ("s3://{bucket}/" + "p" * 140, {}, "characters long, and sweeps names its files by it"),
    ("nosuchfs://b/x", {}, "has the scheme nosuchfs://, which pyarrow (Ray's storage layer) "
                           "does not know"),
])
def test_bad_stores_fail_in_one_line(moto_s3, monkeypatch, uri, env, message) -> None:
    for key, value in env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    started = time.monotonic()
    with pytest.raises(ConfigError) as err:
        check_store(uri.format(bucket=moto_s3.BUCKET))
    text = str(err.value)
    assert message in text and text.startswith("sweep.dir: ") and "\n" not in text
    assert time.monotonic() - started < 30
    for secret in (os.environ.get("AWS_SECRET_ACCESS_KEY"), "wrong-secret-0123456789"):
        assert not secret or secret not in text, "credentials are never printed"


def test_the_dry_run_of_an_s3_sweep_names_its_uri(moto_s3) -> None:
    """The plan shows where the sweep lives as the user wrote it, not sweeps' stand-in path."""
    from sweeps import compose, prepare
    from sweeps.driver.dry_run import format_plan

    uri = f"s3://{moto_s3.BUCKET}/sweeps/planned"
    plan = format_plan(prepare(compose("digits", [f"sweep.dir={uri}", "ray.num_cpus=2"])))
    assert f"  sweep dir {uri}\n" in plan + "\n" and "sweeps-storage" not in plan
