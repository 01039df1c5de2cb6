"""The container image: checked without a container engine (what it copies is in the build context
as Docker's own ``.dockerignore`` matcher computes it, and no build product of this machine is;
its native library stage builds from what it copies; its dependency export works from the lock;
its handler imports; its entry point runs the CLI or hands over to Lambda's own entry point), and
built and smoke-tested where an engine is available."""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from docker.utils.build import exclude_paths
from infra.function import RUNTIME

from layers import native

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = ROOT / "container" / "entrypoint.sh"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def get(self, instruction: str) -> list[str]:
        return [argument for name, argument in self.instructions if name == instruction]


def _stages() -> tuple[list[str], list[Stage]]:
    """The Dockerfile's global ARGs and its stages, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", DOCKERFILE)
    global_args: list[str] = []
    stages: list[Stage] = []
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, argument = line.split(None, 1)
        if instruction == "FROM":
            base, _, name = argument.partition(" AS ")
            stages.append(Stage(base.strip(), name.strip() or None))
        elif stages:
            stages[-1].instructions.append((instruction, argument))
        else:
            global_args.append(argument)
    return global_args, stages


def _instructions(name: str) -> list[str]:
    """An instruction's arguments in the final stage (the image)."""
    return _stages()[1][-1].get(name)


def _ignore_patterns() -> list[str]:
    """``.dockerignore`` as the Docker client reads it: one pattern a line, comments and blanks dropped."""
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _context(root: Path) -> set[str]:
    """The files the Docker client sends as the build context of ``root`` (its own matcher)."""
    return {path for path in exclude_paths(str(root), _ignore_patterns()) if (root / path).is_file()}


def _copied_sources(stage: Stage) -> list[str]:
    return [source for copy in stage.get("COPY") if not copy.startswith("--from=") for source in shlex.split(copy)[:-1]]


def test_every_stage_is_on_the_lambda_python_the_functions_run() -> None:
    _, stages = _stages()
    assert [stage.base for stage in stages] == [
        f"public.ecr.aws/lambda/python:{RUNTIME.name.removeprefix('python')}"
    ] * 2
    assert stages[-1].name is None  # the image is the last stage


def test_everything_it_copies_is_in_the_build_context() -> None:
    context = _context(ROOT)
    _, stages = _stages()
    copied = [source for stage in stages for source in _copied_sources(stage)]
    for source in copied:
        assert (ROOT / source).exists(), source
        if (ROOT / source).is_dir():
            assert any(path.startswith(source.rstrip("/") + "/") for path in context), source
        else:
            assert source in context, source
    assert {"src/arcs/", "functions/", "uv.lock", "layers/native.py"} <= set(copied)
    # Local state never reaches the build context.
    assert not [p for p in context if p.split("/")[0] in {".venv", "cdk.out", "data", ".git", "tests"}]
    assert not [p for p in context if p.startswith("layers/build/")]


def test_no_build_product_of_this_machine_enters_the_image(tmp_path: Path) -> None:
    """The host's arcs.native library (of the host's architecture, or absent on a clean checkout)
    is left out of the context; the image gets one compiled in its own stage, for its architecture."""
    for name in (
        "src/arcs/native/_arcs_native.so",
        "src/arcs/native/json_rows.c",
        "src/arcs/native/text.h",
        "src/arcs/native/json_rows.o",
        "src/arcs/http/__pycache__/api.cpython-312.pyc",
        "clickbench/x.so",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    assert _context(tmp_path) == {"src/arcs/native/json_rows.c", "src/arcs/native/text.h"}
    assert not [path for path in _context(ROOT) if path.endswith((".so", ".o", ".pyc"))]
    _, stages = _stages()
    library = native.LIBRARY_NAME
    [build_stage] = [stage for stage in stages if any("python3 -m layers.native" in run for run in stage.get("RUN"))]
    [copied] = [copy for copy in stages[-1].get("COPY") if copy.startswith(f"--from={build_stage.name} ")]
    source, target = shlex.split(copied)[1:]
    assert source.endswith(f"/src/arcs/native/{library}")
    assert target == "${LAMBDA_TASK_ROOT}/arcs/native/" + library


def test_the_native_stage_builds_the_library_from_what_it_copies(tmp_path: Path) -> None:
    """The stage's sources, alone in a directory laid out as the stage lays them, compile with the
    lock's Zig (here for this machine; in the image, for the image's architecture)."""
    _, stages = _stages()
    [stage] = [stage for stage in stages if stage.name == "native"]
    workdir = "/build/"
    for copy in stage.get("COPY"):
        *sources, target = shlex.split(copy)
        assert target.startswith(workdir), copy
        destination = tmp_path / target.removeprefix(workdir)
        for source in sources:
            if (ROOT / source).is_dir():
                shutil.copytree(ROOT / source, destination, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            else:
                destination.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / source, destination)
    [run] = stage.get("RUN")
    assert run.endswith(f"cd {workdir.rstrip('/')} && python3 -m layers.native")
    done = subprocess.run(
        [sys.executable, "-m", "layers.native"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    library = tmp_path / "src" / "arcs" / "native" / native.LIBRARY_NAME
    assert done.stdout.strip() == str(library)
    assert library.read_bytes()[:4] == b"\x7fELF"
    # Zig comes from the lock's dev group, as the stage constrains its install.
    export = re.search(r"uv export [^&]*", run).group(0)  # type: ignore[union-attr]
    command = [ROOT.as_posix() if part == "/build" else part for part in shlex.split(export)]
    out = subprocess.run(
        command[: command.index("--output-file")], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert f"ziglang=={metadata.version('ziglang')}" in out.stdout.split()
    assert "--constraint /build/dev.txt ziglang" in run


def test_its_uv_is_the_makefiles_and_its_export_works_from_the_lock() -> None:
    global_args, stages = _stages()
    [uv_version] = global_args
    assert all(stage.get("ARG") == ["UV_VERSION"] for stage in stages)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^UV_VERSION := {re.escape(uv_version.split('=')[1])}$", makefile, re.MULTILINE)
    [export] = [run for run in _instructions("RUN") if "uv export" in run]
    command = shlex.split(re.search(r"uv export [^&]*", export).group(0))  # type: ignore[union-attr]
    command = [ROOT.as_posix() if part == "/tmp/lock" else part for part in command]
    command = command[: command.index("--output-file")]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    pinned = {line.split("==")[0] for line in out.splitlines() if "==" in line}
    assert {"duckdb", "duckdb-extension-httpfs", "pyarrow", "aws-lambda-powertools", "uvicorn"} <= pinned
    assert not {"pytest", "mypy", "aws-cdk-lib", "ziglang"} & pinned  # no dev tools in the image


def test_the_default_command_is_the_query_handler_and_imports() -> None:
    [cmd] = _instructions("CMD")
    [handler] = json.loads(cmd)
    module, attribute = handler.rsplit(".", 1)
    assert callable(getattr(importlib.import_module(module), attribute))
    assert _instructions("ENTRYPOINT") == ['["/usr/local/bin/arcs-entrypoint"]']


def _run_entrypoint(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    fake_lambda = tmp_path / "lambda-entrypoint.sh"
    fake_lambda.write_text('#!/bin/sh\necho "lambda entry: $*"\n')
    fake_lambda.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").symlink_to(sys.executable)  # the image's python3, with its packages
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "ARCS_LAMBDA_ENTRYPOINT": str(fake_lambda),
        "HOME": str(tmp_path),
    }
    return subprocess.run(["sh", str(ENTRYPOINT), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("prefix", [[], ["arcs"]])
@pytest.mark.parametrize("command", ["serve", "local"])
def test_entrypoint_runs_the_cli_for_serve_and_local(prefix: list[str], command: str, tmp_path: Path) -> None:
    done = _run_entrypoint([*prefix, command, "--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"usage: arcs {command}" in done.stdout


def test_the_clickbench_entry_starts_the_image_as_the_entrypoint_understands() -> None:
    start = (ROOT / "clickbench" / "entry" / "start").read_text()
    assert "arcs-serverless:clickbench arcs serve " in start


def test_entrypoint_hands_a_handler_to_lambdas_entrypoint(tmp_path: Path) -> None:
    done = _run_entrypoint(["functions.query.handler.handler"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lambda entry: functions.query.handler.handler"
    assert os.access(ENTRYPOINT, os.X_OK)
    # Outside Lambda (no Runtime API) a streaming handler goes to the base image's entry point too.
    (tmp_path / "stream").mkdir()
    done = _run_entrypoint(["functions.query.handler.stream_handler"], tmp_path / "stream")
    assert done.stdout.strip() == "lambda entry: functions.query.handler.stream_handler"


def _container_engine() -> str:
    """docker or podman, if one can build here; otherwise the test is skipped saying what is missing."""
    tried = []
    for engine in ("docker", "podman"):
        if shutil.which(engine) is None:
            tried.append(f"no {engine}")
            continue
        info = subprocess.run([engine, "info"], capture_output=True, text=True, timeout=60, check=False)
        if info.returncode == 0:
            return engine
        tried.append(f"`{engine} info` failed: {(info.stderr.strip().splitlines() or ['?'])[-1]}")
    pytest.skip(f"image not built: no container engine here ({'; '.join(tried)})")


@pytest.mark.timeout(3600)
def test_the_image_builds_and_loads_a_native_library_of_its_own_architecture() -> None:
    engine = _container_engine()
    tag = f"arcs-image-test:{uuid.uuid4().hex[:8]}"
    subprocess.run([engine, "build", "--tag", tag, str(ROOT)], check=True, timeout=3000)
    try:
        probe = (
            "import platform; from arcs import native; "
            "data = open(native.LIBRARY_PATH, 'rb').read(20); "
            "print(platform.machine(), native.library() is not None, int.from_bytes(data[18:20], 'little'))"
        )
        done = subprocess.run(
            [engine, "run", "--rm", "--entrypoint", "python3", tag, "-c", probe],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        machine, loaded, elf_machine = done.stdout.split()
        assert machine == platform.machine()  # the engine's default platform is this machine's
        assert loaded == "True"
        assert int(elf_machine) == {"x86_64": 62, "aarch64": 183}[machine]
    finally:
        subprocess.run([engine, "rmi", "--force", tag], capture_output=True, check=False, timeout=300)
