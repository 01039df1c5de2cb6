"""Build the Lambda layers from ``uv.lock``: ``python -m layers.build [--arch arm64|x86_64]``.

Three layers, each a ``python/`` tree (Lambda puts ``/opt/python`` on ``sys.path``) and a zip:

- ``duckdb``: duckdb and the ``duckdb-extension-httpfs`` package. :func:`arcs.query.engine.extension_directory`
  finds the extension through that package and lays it out per platform under the function's
  work directory at run time, so the package is shipped as the wheel has it.
- ``deps``: every other locked runtime dependency (pyarrow, msgpack, zstandard, boto3, Powertools),
  trimmed of what no function imports.
- ``core``: the ``arcs`` package itself (changes most often, so it is the smallest to redeploy),
  with the C library of ``arcs.native`` compiled for the layer's architecture (``layers/native.py``).

Wheels are the exact versions ``uv export --frozen`` reads from ``uv.lock``, for CPython 3.12 on
manylinux 2.28 (duckdb 1.5.5 ships no older tag; Lambda's Amazon Linux 2023 has glibc 2.34).
Bytecode is compiled with a 3.12 interpreter (``unchecked-hash`` pycs: valid whatever the file
times after unzipping, and the same bytes on every build) because ``/opt`` is read-only in
Lambda and every cold start would otherwise compile again. Zips have sorted entries and fixed
times, so an unchanged lock gives the same zip and CDK sees no change to deploy.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from layers import native
from layers.services import boto3_services

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "layers" / "build"
CORE_SOURCE = REPO_ROOT / "src" / "arcs"
PYTHON_VERSION = "3.12"
ARCHITECTURES = {"arm64": "aarch64-manylinux_2_28", "x86_64": "x86_64-manylinux_2_28"}
DEFAULT_ARCH = "arm64"

#: Which locked distributions go into which layer; everything else locked goes into ``deps``.
DUCKDB_DISTRIBUTIONS = frozenset({"duckdb", "duckdb-extension-httpfs"})
LAYERS = ("duckdb", "deps", "core")
#: The layers of each function (named as in ``infra/``) and its code folder under ``functions/``.
#: DuckDB only where SQL runs; the edge, authorizer and ingest never import it.
FUNCTION_LAYERS: dict[str, tuple[str, ...]] = {
    "edge": ("deps", "core"),
    "ingest": ("deps", "core"),
    "authorizer": ("deps", "core"),
    "query": ("duckdb", "deps", "core"),
    "tasks": ("duckdb", "deps", "core"),
    "bootstrap": ("deps", "core"),
}
FUNCTION_FOLDERS = {
    "edge": "ingest",
    "ingest": "ingest",
    "authorizer": "authorizer",
    "query": "query",
    "tasks": "compact",
    "bootstrap": "bootstrap",
}
#: Where Lambda unpacks a layer's ``python/`` directory.
LAMBDA_LAYER_ROOT = "/opt/python"
#: Lambda's limit for a function's code and all its layers, unzipped (AWS counts 250 MB as this).
LAMBDA_UNZIPPED_LIMIT = 262_144_000

#: Where the functions' code is: what it makes boto3 clients for decides which botocore models stay.
FUNCTIONS_SOURCE = REPO_ROOT / "functions"
#: Models kept whatever the code names: STS, which botocore's own credential providers call (web
#: identity, assumed roles), and X-Ray, which X-Ray's SDK makes a client for when it is imported
#: (its sampler's; ``arcs.tracing``).
BOTOCORE_IMPLICIT_SERVICES = frozenset({"sts", "xray"})


@functools.cache
def botocore_services() -> frozenset[str]:
    """botocore's service models the layers keep: every service the core and the handlers make a
    client for (read from their source, :mod:`layers.services`), STS and X-Ray; the other ~440 services
    are 25 MB nobody loads."""
    return boto3_services([CORE_SOURCE, FUNCTIONS_SOURCE]) | BOTOCORE_IMPLICIT_SERVICES


#: Trimmed from every layer: tests, caches, type stubs, C headers and sources.
_TRIM_DIRS = frozenset({"__pycache__", "tests", "include", "src"})
_TRIM_SUFFIXES = (".pyi", ".pyx", ".pxd", ".pxi", ".a", ".h", ".hpp", ".cc", ".cpp")
#: pyarrow parts no function imports (flight, the cloud file systems pyarrow.fs loads lazily, ORC,
#: its own C++ tests). What every pyarrow extension links (dataset, acero, substrait, parquet,
#: compute) stays. The unversioned and full-version copies of libarrow_python*.so are only for
#: linking C++ extensions at build time: the loader asks for the ``.so.<major>`` SONAME.
_PYARROW_TRIM = (
    "_flight*",
    "libarrow_flight*",
    "libarrow_python_flight*",
    "flight.py",
    "_s3fs*",
    "libarrow_s3*",
    "_azurefs*",
    "_gcsfs*",
    "_hdfs*",
    "_orc*",
    "_dataset_orc*",
    "orc.py",
    "_pyarrow_cpp_tests*",
    "benchmark.py",
    "cffi.py",
    "libarrow_python.so",
    "libarrow_python.so.*.*",
    "libarrow_python_parquet_encryption.so",
    "libarrow_python_parquet_encryption.so.*.*",
)
#: zstandard ships a C extension and a CFFI one (12 MB each); CPython uses the C one.
_ZSTANDARD_TRIM = ("_cffi*", "backend_cffi.py")


@dataclass(frozen=True)
class LayerInfo:
    name: str
    zip_path: str
    zipped_bytes: int
    unzipped_bytes: int
    distributions: list[str]


@dataclass(frozen=True)
class Manifest:
    architecture: str
    python_version: str
    bytecode: bool
    layers: dict[str, LayerInfo]

    @classmethod
    def load(cls, path: Path) -> Manifest:
        raw = json.loads(path.read_text())
        layers = {name: LayerInfo(**info) for name, info in raw["layers"].items()}
        return cls(raw["architecture"], raw["python_version"], raw["bytecode"], layers)


def arch_dir(arch: str, build_dir: Path = BUILD_DIR) -> Path:
    return build_dir / arch


def locked_requirements() -> list[str]:
    """``name==version`` of every runtime dependency in ``uv.lock`` (no dev group, no extras)."""
    out = subprocess.run(
        ["uv", "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-project", "--no-header", "--no-annotate"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(line.strip() for line in out.splitlines() if line.strip() and not line.startswith("#"))


#: In the dev environment (the clickbench extra brings them), never in the layers; pyarrow and
#: DuckDB import them whenever they can, so a probe of the function's imports must not see them.
NOT_IN_LAYERS = ("numpy", "pandas")

_ABSENT_PACKAGES = """\
# Written by layers.build.hide_packages_the_layers_lack: these import as packages that are not installed.
import sys


class _NotInTheLayers:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the Lambda layers)", name=name)
        return None


sys.meta_path.insert(0, _NotInTheLayers())
"""


def hide_packages_the_layers_lack(directory: Path) -> Path:
    """A directory that, first on a child's ``PYTHONPATH``, makes each of ``NOT_IN_LAYERS`` fail to
    import exactly as a package that is not installed does (via ``sitecustomize``).

    Not a stand-in package whose ``__init__`` raises: while it runs, a half-made module sits in
    ``sys.modules``, and a second thread importing it meanwhile (DuckDB opens on its own thread and
    looks for pandas) gets that module instead of an ImportError.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_ABSENT_PACKAGES.format(names=set(NOT_IN_LAYERS)))
    return directory


def _dist_name(requirement: str) -> str:
    return requirement.split("==")[0].split(";")[0].strip().lower().replace("_", "-")


def install(requirements: Iterable[str], target: Path, arch: str) -> None:
    reqs = target.parent.parent / f"{target.parent.name}-requirements.txt"  # beside the layer, not in it
    reqs.write_text("\n".join(requirements) + "\n")
    subprocess.run(
        [
            "uv",
            "pip",
            "install",
            "--quiet",
            "--target",
            str(target),
            "--python-platform",
            ARCHITECTURES[arch],
            "--python-version",
            PYTHON_VERSION,
            "--only-binary",
            ":all:",
            # The export is the full locked closure: nothing to resolve, nothing else may come in.
            "--no-deps",
            "-r",
            str(reqs),
        ],
        cwd=REPO_ROOT,
        check=True,
    )


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def trim(root: Path) -> None:
    """Remove what no function imports; see the lists above for what and why."""
    for path in sorted(root.rglob("*"), reverse=True):
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_dir() and path.name in _TRIM_DIRS and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_file() and path.name.endswith(_TRIM_SUFFIXES):
            path.unlink()
    for package, patterns in (("pyarrow", _PYARROW_TRIM), ("zstandard", _ZSTANDARD_TRIM)):
        for pattern in patterns:
            for path in (root / package).glob(pattern):
                _remove(path)
    data = root / "botocore" / "data"
    if data.is_dir():
        for service in data.iterdir():
            if service.is_dir() and service.name not in botocore_services():
                shutil.rmtree(service)


def find_python(version: str = PYTHON_VERSION) -> str | None:
    """An interpreter of the Lambda's Python version, to compile bytecode and run the smoke test."""
    home = Path.home()
    candidates = [
        os.environ.get("LAYERS_PYTHON", ""),
        shutil.which(f"python{version}") or "",
        *sorted(str(p) for p in (home / ".pyenv" / "versions").glob(f"{version}.*/bin/python{version}")),
    ]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


def compile_bytecode(root: Path, python: str) -> None:
    """Bytecode that names its files as Lambda sees them (``/opt/python/...``, also in tracebacks),
    and is the same bytes on every build: no build path inside, no hash-seed-dependent set order."""
    subprocess.run(
        [
            python,
            "-s",  # not -I: it would ignore PYTHONHASHSEED; the environment below is clean instead
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-s",
            str(root),
            "-p",
            LAMBDA_LAYER_ROOT,
            str(root),
        ],
        check=True,
        env={"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")},
    )


def tree_bytes(root: Path) -> int:
    """Unzipped size as Lambda counts it: file contents (symlinks are stored as what they point to)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def write_zip(source: Path, target: Path) -> None:
    """A deterministic zip of ``source``'s contents: sorted names, fixed times, modes kept."""
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in sorted(source.rglob("*")):
            if not path.is_file():
                continue
            info = zipfile.ZipInfo(str(path.relative_to(source)), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if os.access(path, os.X_OK) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            with path.open("rb") as src, archive.open(info, "w") as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
    os.replace(tmp, target)


def build(arch: str = DEFAULT_ARCH, build_dir: Path = BUILD_DIR, python: str | None = None) -> Manifest:
    if arch not in ARCHITECTURES:
        raise SystemExit(f"unknown architecture {arch!r}; one of {sorted(ARCHITECTURES)}")
    python = python or find_python()
    out = arch_dir(arch, build_dir)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    requirements = locked_requirements()
    groups = {
        "duckdb": [r for r in requirements if _dist_name(r) in DUCKDB_DISTRIBUTIONS],
        "deps": [r for r in requirements if _dist_name(r) not in DUCKDB_DISTRIBUTIONS],
        "core": [],
    }
    missing = DUCKDB_DISTRIBUTIONS - {_dist_name(r) for r in groups["duckdb"]}
    if missing:
        raise SystemExit(f"uv.lock has no {sorted(missing)}")

    layers: dict[str, LayerInfo] = {}
    for name in LAYERS:
        root = out / name / "python"
        root.mkdir(parents=True)
        if groups[name]:
            install(groups[name], root, arch)
        else:
            # This machine's native library stays behind; the layer gets one built for its architecture.
            ignored = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.c", "*.h")
            shutil.copytree(CORE_SOURCE, root / "arcs", ignore=ignored)
            native.build(arch, root / "arcs" / "native")
        trim(root)
        if python:
            compile_bytecode(root, python)
        zip_path = out / f"{name}.zip"
        write_zip(out / name, zip_path)
        layers[name] = LayerInfo(
            name=name,
            zip_path=str(zip_path.relative_to(out)),
            zipped_bytes=zip_path.stat().st_size,
            unzipped_bytes=tree_bytes(out / name),
            distributions=groups[name] or ["arcs (src/arcs)"],
        )
    manifest = Manifest(arch, PYTHON_VERSION, python is not None, layers)
    (out / "manifest.json").write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return manifest


def describe(manifest: Manifest) -> str:
    lines = [f"layers for Python {manifest.python_version} on {manifest.architecture} (bytecode: {manifest.bytecode})"]
    for info in manifest.layers.values():
        lines.append(
            f"  {info.name:<7} {info.zipped_bytes / 1e6:7.1f} MB zipped  {info.unzipped_bytes / 1e6:7.1f} MB unzipped"
        )
    total = sum(i.unzipped_bytes for i in manifest.layers.values())
    zipped = sum(i.zipped_bytes for i in manifest.layers.values())
    lines.append(f"  {'all':<7} {zipped / 1e6:7.1f} MB zipped  {total / 1e6:7.1f} MB unzipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--arch", choices=sorted(ARCHITECTURES), default=DEFAULT_ARCH)
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    args = parser.parse_args(argv)
    python = find_python()
    if python is None:
        print(f"no Python {PYTHON_VERSION} found: layers ship without bytecode (set LAYERS_PYTHON)", file=sys.stderr)
    manifest = build(args.arch, args.build_dir, python)
    print(describe(manifest))


if __name__ == "__main__":
    main()
