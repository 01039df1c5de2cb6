"""Check built layers: ``python -m layers.check --arch ARCH [--smoke]``.

- Size: every function's code plus its layers, unzipped, within Lambda's 250 MB; fails otherwise.
- Smoke (``--smoke``, only for the machine's own architecture): ``layers/smoke.py`` in a clean
  Python 3.12 interpreter whose path holds nothing but the standard library and the layers, against
  a moto server started here (moto itself is not in the layers, and must not be).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from layers.build import (
    BUILD_DIR,
    FUNCTION_FOLDERS,
    FUNCTION_LAYERS,
    LAMBDA_UNZIPPED_LIMIT,
    REPO_ROOT,
    Manifest,
    arch_dir,
    find_python,
)

FUNCTIONS_DIR = REPO_ROOT / "functions"
SMOKE_SCRIPT = Path(__file__).with_name("smoke.py")
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


def smoke(arch: str, build_dir: Path = BUILD_DIR, python: str | None = None, timeout_s: float = 300) -> str:
    """Run ``layers/smoke.py`` on the layers of ``arch`` against a fresh moto server; returns its output."""
    if arch != HOST_ARCH:
        raise CheckFailed(f"cannot run {arch} layers on this {HOST_ARCH} machine")
    python = python or find_python()
    if python is None:
        raise CheckFailed("no Python 3.12 interpreter to run the layers with (set LAYERS_PYTHON)")
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    import boto3

    # The dev environment's boto3, only to set the stage; the smoke test itself uses the layers'.
    from arcs.adapters.aws import AwsClients, create_resources

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
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
        with tempfile.TemporaryDirectory(prefix="arcs-smoke-") as tmp:
            env |= {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": tmp,  # empty: no extension DuckDB could have cached under ~/.duckdb
                "ARCS_BACKEND": "aws",
                "ARCS_BUCKET": resources["bucket"],
                "ARCS_TOKENS_TABLE": resources["tokens_table"],
                "ARCS_CATALOG_TABLE": resources["catalog_table"],
                "ARCS_LEASES_TABLE": resources["leases_table"],
                "ARCS_QUEUE_URL": resources["queue_url"],
                "ARCS_PREFIX": "",
                "ARCS_WORK_DIR": str(Path(tmp) / "work"),
                "POWERTOOLS_SERVICE_NAME": "smoke",
            }
            dirs = [str(d) for d in layer_python_dirs(arch, build_dir)]
            done = subprocess.run(
                [python, "-I", "-S", str(SMOKE_SCRIPT), str(FUNCTIONS_DIR), *dirs],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=tmp,
            )
    finally:
        server.stop()
    if done.returncode != 0:
        raise CheckFailed(f"smoke test failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}")
    return done.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--arch", action="append", choices=["arm64", "x86_64"], required=True)
    parser.add_argument("--smoke", action="store_true", help="also run the smoke test (this machine's arch only)")
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    args = parser.parse_args(argv)
    try:
        for arch in args.arch:
            manifest_path = arch_dir(arch, args.build_dir) / "manifest.json"
            if not manifest_path.is_file():
                raise CheckFailed(f"no {arch} layers in {args.build_dir}: run make layers ARCH={arch}")
            print(check_sizes(Manifest.load(manifest_path)))
            if args.smoke and arch == HOST_ARCH:
                print(smoke(arch, args.build_dir))
    except CheckFailed as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
