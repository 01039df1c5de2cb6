"""The end-to-end suite through ``arcs local`` on LocalStack, set up from the package registries.

``make test-localstack`` runs this: LocalStack (``requirements.txt``, pinned with hashes) goes into
a Python 3.13 virtual environment of its own under ``.localstack/``, starts in host mode (no Docker,
no account token) on a free loopback port with a fresh state directory, and serves S3 and SQS.
DynamoDB is a moto server: LocalStack's DynamoDB is AWS's DynamoDB Local, which it downloads from
AWS at first use, and which we neither fetch nor redistribute (docs/localstack.md). Then pytest runs
``tests/e2e`` with every ``arcs local`` pointed at them (``tests/e2e/servers.py``), and both
servers are stopped, whatever the outcome. Arguments are passed to pytest (test paths among them
replace ``tests/e2e``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WORK = ROOT / ".localstack"
VENV = WORK / "venv"
REQUIREMENTS = HERE / "requirements.txt"
PYTHON_VERSION = "3.13"
START_TIMEOUT_S = 120.0


def log(message: str) -> None:
    print(f"[test-localstack] {message}", flush=True)


def uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def python_313() -> str:
    """An interpreter for LocalStack: ``LOCALSTACK_PYTHON``, one uv finds (PATH, pyenv's versions),
    or one uv installs (which needs its download host: not on machines that reach only registries)."""
    if chosen := os.environ.get("LOCALSTACK_PYTHON"):
        return chosen
    candidates = [str(path) for path in sorted(Path("~/.pyenv/versions").expanduser().glob("3.13*/bin/python3.13"))]
    for candidate in candidates:
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    found = subprocess.run([*uv(), "python", "find", PYTHON_VERSION], capture_output=True, text=True)
    if found.returncode == 0:
        return found.stdout.strip()
    installed = subprocess.run([*uv(), "python", "install", PYTHON_VERSION], capture_output=True, text=True)
    found = subprocess.run([*uv(), "python", "find", PYTHON_VERSION], capture_output=True, text=True)
    if installed.returncode == 0 and found.returncode == 0:
        return found.stdout.strip()
    raise SystemExit(
        f"LocalStack needs Python {PYTHON_VERSION}: none found and `uv python install` failed "
        f"({installed.stderr.strip().splitlines()[-1:]}); set LOCALSTACK_PYTHON to one"
    )


def install_localstack() -> Path:
    """The LocalStack environment, made again only when the lock file changes."""
    stamp = VENV / "requirements.sha256"
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return VENV / "bin" / "python"
    shutil.rmtree(VENV, ignore_errors=True)
    interpreter = python_313()
    log(f"installing LocalStack into {VENV.relative_to(ROOT)} with {interpreter}")
    subprocess.run([*uv(), "venv", "--quiet", "--python", interpreter, str(VENV)], check=True)
    python = VENV / "bin" / "python"
    subprocess.run(
        [*uv(), "pip", "install", "--quiet", "--python", str(python), "--require-hashes", "-r", str(REQUIREMENTS)],
        check=True,
    )
    stamp.write_text(digest)
    return python


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(name: str, args: Sequence[str], env: dict[str, str], ready: str) -> Iterator[None]:
    """A server process, its output in ``.localstack/<name>.log``, until ``ready`` answers 200; then
    SIGTERM at exit (SIGKILL after 30 s)."""
    with (WORK / f"{name}.log").open("w") as output:
        process = subprocess.Popen(args, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise SystemExit(f"{name} exited with {process.returncode}: see {WORK / name}.log")
            try:
                if httpx.get(ready, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} did not answer {ready} in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def localstack_environment(port: int, root: Path) -> dict[str, str]:
    """Host mode as LocalStack's own container sets it up, less everything that reaches outside."""
    return {
        **os.environ,
        "OVERRIDE_IN_DOCKER": "0",  # host mode: not in a container, and no Docker to start one
        "GATEWAY_LISTEN": f"127.0.0.1:{port}",
        "FILESYSTEM_ROOT": str(root),  # its state, caches and libraries, instead of /var/lib/localstack
        "SERVICES": "s3,sqs",
        "EAGER_SERVICE_LOADING": "1",  # ready means S3 and SQS are up, not loaded at first request
        "SQS_ENDPOINT_STRATEGY": "path",  # queue URLs on the gateway's address, not a public DNS name
        "DNS_ADDRESS": "0",  # no DNS server of its own (it would need port 53)
        "SKIP_SSL_CERT_DOWNLOAD": "1",  # a self-signed certificate instead of fetching one
        "DISABLE_EVENTS": "1",  # no analytics
        "LOCALSTACK_AUTH_TOKEN": "",
    }


def main(pytest_args: Sequence[str]) -> int:
    started = time.monotonic()
    WORK.mkdir(exist_ok=True)
    python = install_localstack()
    log(f"LocalStack installed after {time.monotonic() - started:.0f} s")
    root = WORK / "root"
    shutil.rmtree(root, ignore_errors=True)  # every run starts from empty buckets, queues and tables
    root.mkdir()
    localstack_port, moto_port = free_port(), free_port()
    localstack = f"http://127.0.0.1:{localstack_port}"
    moto = f"http://127.0.0.1:{moto_port}"
    with ExitStack() as stack:
        stack.enter_context(
            server(
                "localstack",
                [str(python), "-m", "localstack.runtime.main"],
                localstack_environment(localstack_port, root),
                f"{localstack}/_localstack/health",
            )
        )
        moto_server = str(Path(sys.executable).with_name("moto_server"))
        stack.enter_context(
            server("moto", [moto_server, "-H", "127.0.0.1", "-p", str(moto_port)], dict(os.environ), moto)
        )
        log(
            f"LocalStack (S3, SQS) at {localstack}, moto (DynamoDB) at {moto}, after {time.monotonic() - started:.0f} s"
        )
        env = {**os.environ, "ARCS_E2E_AWS_ENDPOINT_URL": localstack, "ARCS_E2E_AWS_ENDPOINT_URL_DYNAMODB": moto}
        paths = [] if any(arg.startswith("tests/") for arg in pytest_args) else ["tests/e2e"]
        tests = subprocess.run([sys.executable, "-m", "pytest", *paths, *pytest_args], cwd=ROOT, env=env)
    log(f"done in {time.monotonic() - started:.0f} s, pytest exit code {tests.returncode}")
    return tests.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
