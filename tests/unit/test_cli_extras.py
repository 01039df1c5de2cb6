"""``arcs serve`` and ``arcs local`` without the ``server`` extra: one line saying what to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arcs.cli import EXTRA_HINT

# The module is made unimportable as it is when the extra is not installed.
SCRIPT = "import sys; sys.modules[{module!r}] = None; from arcs.cli import main; main({argv!r})"


@pytest.mark.parametrize(
    ("module", "command"),
    [("google_crc32c", "serve"), ("uvicorn", "serve"), ("moto", "local"), ("google_crc32c", "local")],
)
def test_a_missing_server_extra_is_one_line_naming_it(tmp_path: Path, module: str, command: str) -> None:
    argv = [command, "--port", "0"] + (["--data-dir", str(tmp_path / "data")] if command == "serve" else [])
    env = {key: value for key, value in os.environ.items() if key != "AWS_ENDPOINT_URL"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(module=module, argv=argv)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"arcs {command} needs the 'server' extra ({module} not installed): {EXTRA_HINT}"
    ]
    assert not (tmp_path / "data").exists()  # nothing was started or created
