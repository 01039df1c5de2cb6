"""Check built layers: ``python -m layers.check --arch ARCH [--smoke]``.

- Size: every function's code plus its layers, unzipped, within Lambda's 250 MB; fails otherwise.
- Smoke (``--smoke``): ``layers/smoke/`` (a folder Python runs) in a clean Python 3.12 interpreter of the layers'
  architecture (this machine's, or a foreign one under qemu's user-mode emulation) whose path holds
  nothing but the standard library and the layers, against a moto server started here (moto itself
  is not in the layers, and must not be). What this machine cannot run is said, not passed over.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layers import emulation
from layers.build import (
    BUILD_DIR,
    FUNCTION_FOLDERS,
    FUNCTION_LAYERS,
    FUNCTIONS_SOURCE,
    LAMBDA_UNZIPPED_LIMIT,
    PYTHON_VERSION,
    Manifest,
    arch_dir,
    find_python,
)
from layers.emulation import Unavailable

FUNCTIONS_DIR = FUNCTIONS_SOURCE
SMOKE_SCRIPT = Path(__file__).with_name("smoke")  # a folder: python runs its __main__.py
NATIVE_PROBE = Path(__file__).with_name("native_probe.py")
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}
HOST_ARCH = _MACHINES.get(platform.machine().lower())


class CheckFailed(Exception):
    pass


@dataclass(frozen=True)
class FunctionSize:
    function: str
    code_bytes: int
    layer_bytes: int

    @property
    def total(self) -> int:
        return self.code_bytes + self.layer_bytes


def code_bytes(folder: Path) -> int:
    """What CDK stages for a function: its folder, without caches (infra/function.py excludes them)."""
    files = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return sum(p.stat().st_size for p in files)


def function_sizes(manifest: Manifest, functions_dir: Path = FUNCTIONS_DIR) -> list[FunctionSize]:
    sizes = []
    for function, layer_names in FUNCTION_LAYERS.items():
        folder = functions_dir / FUNCTION_FOLDERS[function]
        layer_bytes = sum(manifest.layers[name].unzipped_bytes for name in layer_names)
        sizes.append(FunctionSize(function, code_bytes(folder) if folder.is_dir() else 0, layer_bytes))
    return sizes


def check_sizes(manifest: Manifest, functions_dir: Path = FUNCTIONS_DIR, limit: int = LAMBDA_UNZIPPED_LIMIT) -> str:
    """A report of every function's unzipped size; raises :class:`CheckFailed` if one is over ``limit``."""
    sizes = function_sizes(manifest, functions_dir)
    lines = [f"unzipped sizes on {manifest.architecture} (limit {limit / 1e6:.1f} MB: function code + its layers)"]
    for size in sizes:
        lines.append(
            f"  {size.function:<10} {size.total / 1e6:7.1f} MB  (code {size.code_bytes / 1e3:.0f} kB, "
            f"layers {', '.join(FUNCTION_LAYERS[size.function])})"
        )
    report = "\n".join(lines)
    over = [s.function for s in sizes if s.total > limit]
    if over:
        raise CheckFailed(f"{report}\nover Lambda's unzipped limit: {', '.join(over)}")
    return report


def layer_python_dirs(arch: str, build_dir: Path = BUILD_DIR) -> list[Path]:
    manifest = Manifest.load(arch_dir(arch, build_dir) / "manifest.json")
    return [arch_dir(arch, build_dir) / name / "python" for name in manifest.layers]


#: Lambda's architecture names to the CPU names Python reports.
_CPUS = {"arm64": "aarch64", "x86_64": "x86_64"}


def interpreter(arch: str) -> list[str]:
    """The command that runs a Python 3.12 of ``arch`` here: this machine's own, or a foreign one
    under qemu's user-mode emulation. A foreign interpreter comes with its C library in a root
    directory (``LAYERS_ROOT_<ARCH>``, given to qemu as ``-L``), and ``LAYERS_PYTHON_<ARCH>`` is its
    path inside that root. Raises :class:`Unavailable` naming what is missing."""
    if arch == HOST_ARCH:
        python = find_python()
        if python is None:
            raise Unavailable(f"no Python {PYTHON_VERSION} interpreter to run the {arch} layers (set LAYERS_PYTHON)")
        return [python]
    qemu, cpu = emulation.emulator(arch), _CPUS[arch]
    key = arch.upper()
    root, python = os.environ.get(f"LAYERS_ROOT_{key}"), os.environ.get(f"LAYERS_PYTHON_{key}")
    if not root or not python:
        raise Unavailable(
            f"{arch} layers not run: no {cpu} CPython {PYTHON_VERSION} with its C library "
            f"(set LAYERS_ROOT_{key} to its root and LAYERS_PYTHON_{key} to the interpreter in it); "
            f"Debian has {cpu} CPython 3.11 (bookworm) and 3.13 (trixie), not {PYTHON_VERSION}"
        )
    command = [qemu, "-L", root, str(Path(root) / python.lstrip("/"))]
    probe = subprocess.run(
        [*command, "-c", "import platform, sys; print(platform.machine(), '%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.stdout.split() != [cpu, PYTHON_VERSION]:
        raise Unavailable(
            f"{arch} layers not run: {' '.join(command)} is not {cpu} Python {PYTHON_VERSION}: "
            f"{probe.stdout.strip()} {probe.stderr.strip()[-500:]}"
        )
    return command


def native_answers(arch: str, build_dir: Path = BUILD_DIR) -> dict[str, Any]:
    """What the core layer's C library of ``arch`` computes (:mod:`layers.native_probe`), run by
    this machine's Python or, for a foreign ``arch``, by Debian's under qemu."""
    foreign = arch != HOST_ARCH
    command = emulation.python_command(arch, build_dir / "emulation" / arch) if foreign else [sys.executable]
    core = arch_dir(arch, build_dir) / "core" / "python"
    done = subprocess.run(
        [*command, "-I", "-S", "-B", str(NATIVE_PROBE), str(core)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise CheckFailed(f"the {arch} native library probe failed:\n{done.stderr[-4000:]}")
    answers: dict[str, Any] = json.loads(done.stdout)
    if answers["machine"] != _CPUS[arch]:
        raise CheckFailed(f"the {arch} probe ran on {answers['machine']}")
    return answers


def _tasks_function(session: Any, endpoint: str, name: str) -> str:
    """A tasks function in the server's Lambda API, for the trigger route to invoke. The server
    answers invocations without running code (no container engine): what it checks is that the
    client exists in the layers and sends an ``Invoke`` the Lambda API accepts."""
    iam = session.client("iam", endpoint_url=endpoint)
    role = iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
                ],
            }
        ),
    )["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", "def handler(event, context):\n    return event\n")
    created = session.client("lambda", endpoint_url=endpoint).create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler="handler.handler", Code={"ZipFile": code.getvalue()}
    )
    return str(created["FunctionArn"])


def smoke(arch: str, build_dir: Path = BUILD_DIR, timeout_s: float = 300) -> str:
    """Run ``layers/smoke/`` on the layers of ``arch`` against a fresh moto server; returns its
    last line. Raises :class:`Unavailable` when this machine cannot run ``arch``."""
    command = interpreter(arch)
    if arch != HOST_ARCH:
        timeout_s *= 4  # every instruction emulated
    import logging

    import requests
    from moto.moto_api import recorder
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    import boto3

    # The dev environment's boto3, only to set the stage; the smoke test itself uses the layers'.
    from arcs.adapters.aws.wiring import AwsClients, create_resources

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    # Invocations answered by the server itself, as Lambda accepts them, instead of in a container.
    requests.post(f"{endpoint}/moto-api/config", json={"lambda": {"use_docker": False}}, timeout=10)
    recording = recorder._location  # moto reads where to record from its environment once, when imported
    try:
        suffix = uuid.uuid4().hex[:8]
        env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
        }
        session = boto3.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - moto takes any keys
            region_name="us-east-1",
        )
        clients = AwsClients.create(session, endpoint_url=endpoint, region="us-east-1")
        try:
            resources = create_resources(
                clients, f"smoke-{suffix}", f"smoke-{suffix}", f"smoke-dlq-{suffix}", f"smoke-{suffix}"
            )
        finally:
            clients.close()
        token = f"smoke-admin-{uuid.uuid4().hex}"
        secrets = session.client("secretsmanager", endpoint_url=endpoint)
        secret = secrets.create_secret(Name=f"smoke-{suffix}", SecretString=token)["ARN"]
        function = _tasks_function(session, endpoint, f"smoke-tasks-{suffix}")
        with tempfile.TemporaryDirectory(prefix="arcs-smoke-") as tmp:
            # The smoke reads back the requests it made of the server (the trigger's Invoke) here.
            recorder._location = str(Path(tmp) / "moto-recording")
            env |= {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": tmp,  # empty: no extension DuckDB could have cached under ~/.duckdb
                "ARCS_BACKEND": "aws",
                "ARCS_BUCKET": resources["bucket"],
                "ARCS_TOKENS_TABLE": resources["tokens_table"],
                "ARCS_CATALOG_TABLE": resources["catalog_table"],
                "ARCS_LEASES_TABLE": resources["leases_table"],
                "ARCS_QUEUE_URL": resources["queue_url"],
                "ARCS_TASKS_FUNCTION": function,
                # The smoke's two files of one old hour are a compaction candidate.
                "ARCS_COMPACTION_MIN_FILES": "2",
                "ARCS_COMPACTION_MIN_AGE_S": "0",
                "ARCS_PREFIX": "",
                "ARCS_WORK_DIR": str(Path(tmp) / "work"),
                "POWERTOOLS_SERVICE_NAME": "smoke",
                "SMOKE_ADMIN_SECRET_ARN": secret,
                "SMOKE_ADMIN_TOKEN": token,
            }
            dirs = [str(d) for d in layer_python_dirs(arch, build_dir)]
            done = subprocess.run(
                [*command, "-I", "-S", "-B", str(SMOKE_SCRIPT), str(FUNCTIONS_DIR), *dirs],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=tmp,
            )
    finally:
        recorder.stop_recording()
        recorder._location = recording
        requests.post(f"{endpoint}/moto-api/config", json={"lambda": {"use_docker": True}}, timeout=10)
        server.stop()
    if done.returncode != 0:
        raise CheckFailed(f"smoke test failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}")
    return done.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--arch", action="append", choices=["arm64", "x86_64"], required=True)
    parser.add_argument(
        "--smoke", action="store_true", help="also run the smoke test (a foreign arch under qemu, when it can)"
    )
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    args = parser.parse_args(argv)
    try:
        for arch in args.arch:
            manifest_path = arch_dir(arch, args.build_dir) / "manifest.json"
            if not manifest_path.is_file():
                raise CheckFailed(f"no {arch} layers in {args.build_dir}: run make layers ARCH={arch}")
            print(check_sizes(Manifest.load(manifest_path)))
            if args.smoke:
                try:
                    print(smoke(arch, args.build_dir))
                except Unavailable as exc:
                    print(f"SMOKE NOT RUN: {exc}")
                if arch != HOST_ARCH and HOST_ARCH is not None:
                    try:
                        same = (
                            native_answers(arch, args.build_dir)["answers"]
                            == native_answers(HOST_ARCH, args.build_dir)["answers"]
                        )
                    except Unavailable as exc:
                        print(f"NATIVE LIBRARY NOT RUN: {exc}")
                    else:
                        if not same:
                            raise CheckFailed(f"the {arch} native library answers differently from {HOST_ARCH}'s")
                        print(f"native library: {arch} under emulation answers as {HOST_ARCH}")
    except CheckFailed as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
