"""Shared fixtures. Every Ray instance a test starts is shut down by it, except the session's
shared one (``ray_cluster``): up for the tests that ask for it, down for every other test (so a
test with its own Ray never runs beside a second instance), checked after each of its tests for
anything left on it, and shut down at the session's end."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules whose every test is on the shared Ray instance first, one after another
    (each module's tests in their order), so the instance starts once. Skip the ``gpu`` tests
    on a machine without a CUDA GPU. A torch that does not import (a broken CUDA build, a
    missing library) is no such machine: each ``gpu`` test then fails with torch's own error,
    instead of skipping as if there were simply no GPU."""
    apart = {item.module.__name__ for item in items
             if not _shares(item) and getattr(item, "module", None) is not None}
    items.sort(key=lambda item: getattr(item, "module", None) is None
               or item.module.__name__ in apart)
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the finding
        _TORCH_IMPORT_ERROR.append(exc)  # pytest_runtest_setup fails each gpu test with it
        return
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (run on a GPU machine: pytest -m gpu)")
        for item in gpu_items:
            item.add_marker(skip)


_TORCH_IMPORT_ERROR: list[BaseException] = []


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fails a ``gpu`` test at set-up with the error ``import torch`` raised at collection.
    Brings the shared Ray instance up for a test that asks for ``ray_cluster``, and down for
    any other (it may start its own)."""
    if _shares(item):
        _shared_up()
    else:
        _shared_down()
    if _TORCH_IMPORT_ERROR and "gpu" in item.keywords:
        error = _TORCH_IMPORT_ERROR[0]
        raise RuntimeError(f"torch does not import, so the gpu tests cannot run: "
                           f"{type(error).__name__}: {error}") from error


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run every test in its own directory: defaults like outputs/<name> and mlflow.db are
    relative to it, and a user's earlier `make demo` in the checkout must not change a result."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _no_mlflow_variables_of_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    """sweeps honours MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME: a developer's own (set
    in the shell that runs the suite) must not send the tests' runs to their server. Tests of
    the variables set them themselves."""
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _mlflow_global_uri_restored() -> Iterator[None]:
    """A test that points MLflow's process-global tracking URI somewhere (a server it then
    stops) must not leave the next test's plain ``mlflow`` calls pointing there."""
    def current() -> str | None:
        if "mlflow" not in sys.modules:
            return None
        from mlflow.tracking._tracking_service import utils
        return utils._tracking_uri

    saved = current()
    yield
    if "mlflow" in sys.modules:
        from mlflow.tracking._tracking_service import utils
        utils._tracking_uri = saved


def _ray_init() -> None:
    """A local Ray instance with 2 CPUs and no dashboard (so no State API)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    # Workers import test-only trainables from tests/ by module name.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)


@contextlib.contextmanager
def private_ray() -> Iterator[None]:
    """A private local Ray instance (``_ray_init``'s), shut down on leaving."""
    import ray

    _shared_down()
    _ray_init()
    try:
        yield
    finally:
        ray.shutdown()


_SHARED: list[bool] = []  # the shared instance is up (this process started it)


def _shares(item: pytest.Item) -> bool:
    return "ray_cluster" in getattr(item, "fixturenames", ())


def _shared_up() -> None:
    import ray

    if not (_SHARED and ray.is_initialized()):
        _ray_init()
        _SHARED[:] = [True]


def _shared_down() -> None:
    if _SHARED:
        import ray

        ray.shutdown()
        _SHARED.clear()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _shared_down()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """The session's shared Ray instance (``_ray_init``'s), for a whole test module: started
    once and kept up while the tests that ask for it follow one another."""
    _shared_up()
    yield


LEAK_WAIT_S = 30.0  # Ray's own teardown of a sweep's actors is asynchronous


@pytest.fixture(autouse=True)
def _nothing_left_on_the_shared_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the shared instance: no CPU held (by an actor or a task), no placement
    group and no sweeps ledger record (``pg/``, ``ctl/``) left on it, so the next test starts
    on an instance whose resources are all free, as its own would be. (Idle actors holding no
    resource are let be: a plain Ray Train run keeps its TrainController and DatasetManager
    alive in the process that ran it, which is Ray's own doing.)"""
    yield
    import ray

    if not (_shares(request.node) and _SHARED and ray.is_initialized()):
        return
    from ray._private.state import actors
    from ray.util import placement_group_table

    from sweeps._ray import kv

    deadline = time.monotonic() + LEAK_WAIT_S
    while True:
        cpus = ray.cluster_resources().get("CPU", 0.0) - ray.available_resources().get("CPU", 0.0)
        held = {k: g["state"] for k, g in placement_group_table().items()
                if g["state"] != "REMOVED"}
        records = kv.keys("pg/") + kv.keys("ctl/")
        if not (cpus > 0 or held or records):
            return
        if time.monotonic() > deadline:
            alive = sorted(a.get("ActorClassName", "") for a in actors().values()
                           if a.get("State") != "DEAD" and not a.get("IsDetached"))
            _shared_down()  # the next test gets a fresh instance, not this one's leftovers
            pytest.fail(f"left on the shared Ray instance after {LEAK_WAIT_S:.0f} s: {cpus:g} "
                        f"CPU(s) held, placement groups {held}, ledger records {records} "
                        f"(live actors: {alive})")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def second_ray_instance() -> Iterator[subprocess.Popen]:
    """Another Ray instance on this machine for the duration of a test module.

    Two instances break Ray Train's own placement-group cleaner ("Found multiple active Ray
    instances"); the sweep must release its trials' resources regardless. The child shuts its
    instance down on SIGTERM.
    """
    script = textwrap.dedent("""
        import signal, sys, time, ray
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        ray.init(num_cpus=1, include_dashboard=False)
        print("ready", flush=True)
        try:
            while True:
                time.sleep(1)
        finally:
            ray.shutdown()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "RAY_ADDRESS": ""})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        time.sleep(1)


def stop_server(proc: subprocess.Popen | None) -> None:
    """SIGKILL a server started in its own session, and all it started; None to store back."""
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    return None


class MLflowServer:
    """A real ``mlflow server`` on loopback (SQLite backend, random port) that can be bounced."""

    def __init__(self, root: Path) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.root = root
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 90) -> None:
        import urllib.request

        log = (self.root / "server.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{self.root / 'server.db'}",
             "--artifacts-destination", str(self.root / "artifacts")],
            stdout=log, stderr=log, start_new_session=True, cwd=self.root)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.uri}/health", timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"mlflow server did not start; see {self.root / 'server.log'}")

    def stop(self) -> None:
        self.proc = stop_server(self.proc)


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[MLflowServer]:
    """A started MLflow tracking server, always stopped afterwards."""
    server = MLflowServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()

# Doctest collection (pyproject's --doctest-modules) imports every module under tests/; this one
# raises at import on purpose (a user module that fails to import: tests/unit/test_worker_contract).
collect_ignore = ["unit/broken_loop.py"]


class MotoS3:
    """A real S3 endpoint on loopback: moto's server as its own process (random port), with
    authentication on, so credentials are checked as AWS checks them. The fixture creates an
    IAM user whose keys the tests export (``env``), and the bucket ``bucket``. Stopped by PID.
    """

    BUCKET = "sweeps-test"

    def __init__(self, root: Path) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    def start(self, timeout_s: float = 60) -> None:
        import urllib.request

        log = (self.root / "moto.log").open("ab")
        # The first 4 requests (the IAM user, its policy and key) are let through unsigned;
        # every later one must be signed with a key moto knows.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log, stderr=log, start_new_session=True, cwd=self.root,
            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start; see {self.root}/moto.log") \
                        from None
                time.sleep(0.2)
        self._credentials()

    def _credentials(self) -> None:
        import json

        import boto3

        common = dict(endpoint_url=self.endpoint, region_name="us-east-1",
                      aws_access_key_id="setup", aws_secret_access_key="setup")
        iam = boto3.client("iam", **common)
        iam.create_user(UserName="sweeps")
        policy = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        iam.attach_user_policy(UserName="sweeps", PolicyArn=policy["Policy"]["Arn"])
        key = iam.create_access_key(UserName="sweeps")["AccessKey"]
        self.env = {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                    "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
        self.client().create_bucket(Bucket=self.BUCKET)

    def client(self):  # noqa: ANN201 (a boto3 S3 client with the test user's keys)
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"])

    def keys(self, prefix: str) -> list[str]:
        """Every object key under ``prefix`` in the test bucket."""
        pages = self.client().get_paginator("list_objects_v2").paginate(
            Bucket=self.BUCKET, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[str, str]]]:
        """``(method, path?query)`` of every request the server answers inside the block
        (moto's recorder), in order; the list is filled when the block ends."""
        import json
        import urllib.request

        def call(action: str) -> bytes:
            method = "GET" if action == "download-recording" else "POST"
            request = urllib.request.Request(f"{self.endpoint}/moto-api/recorder/{action}",
                                             method=method)
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.read()

        requests: list[tuple[str, str]] = []
        call("reset-recording")
        call("start-recording")
        try:
            yield requests
        finally:
            call("stop-recording")
            for line in call("download-recording").decode().splitlines():
                entry = json.loads(line)
                requests.append((entry["method"], entry["url"].split("/", 3)[3]))

    def filesystem(self, endpoint: str | None = None) -> Any:
        """A pyarrow S3 filesystem with the test user's keys, through ``endpoint`` (default:
        the server itself), one try per request."""
        import pyarrow.fs

        return pyarrow.fs.S3FileSystem(
            endpoint_override=endpoint or self.endpoint, scheme="http", region="us-east-1",
            access_key=self.env["AWS_ACCESS_KEY_ID"],
            secret_key=self.env["AWS_SECRET_ACCESS_KEY"],
            retry_strategy=pyarrow.fs.AwsStandardS3RetryStrategy(max_attempts=1))

    @contextlib.contextmanager
    def refusing_uploads(self) -> Iterator[RefusingUploads]:
        """An endpoint in front of this server that refuses every part upload (HTTP 500, as
        a store does after the client's retries) and forwards every other request."""
        proxy = RefusingUploads(self.endpoint)
        proxy.filesystem = self.filesystem(proxy.endpoint)
        try:
            yield proxy
        finally:
            proxy.close()

    def stop(self) -> None:
        self.proc = stop_server(self.proc)


class RefusingUploads:
    """``MotoS3.refusing_uploads``: ``endpoint``, ``filesystem`` through it, and how many
    part uploads it ``refused``."""

    def __init__(self, target: str) -> None:
        import http.client
        import http.server
        import threading
        import urllib.parse

        host, port = urllib.parse.urlsplit(target).netloc.rsplit(":", 1)
        self.refused = 0
        self.filesystem: Any = None
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self) -> None:
                if "partNumber=" in urllib.parse.urlsplit(self.path).query:
                    proxy.refused += 1
                    self.close_connection = True
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                connection = http.client.HTTPConnection(host, int(port), timeout=30)
                connection.request(self.command, self.path, body=self.rfile.read(length),
                                   headers=dict(self.headers))
                response = connection.getresponse()
                body = response.read()
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding",
                                            "connection", "server", "date"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="refusing-uploads",
                         daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """One started moto S3 server per test module, its credentials and endpoint exported to
    this process (and so to the Ray instances it starts) while the module runs."""
    server = MotoS3(tmp_path_factory.mktemp("moto"))
    saved = dict(os.environ)
    try:
        server.start()
        os.environ.update(server.env)
        yield server
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()
        from sweeps.storage import location

        location._filesystem.cache_clear()  # filesystems of this endpoint die with it
