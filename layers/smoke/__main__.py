"""``python -I -S -B layers/smoke FUNCTIONS_DIR LAYER_PYTHON_DIR...``: the smoke test (``__init__``)."""

import importlib
import importlib.util
import sys
from pathlib import Path

# Run as a folder, Python puts the folder first on sys.path and imports nothing that names the
# package. Take the folder off the path (the smoke starts from the standard library alone) and load
# the package by hand, so that its modules import each other relatively.
HERE = Path(__file__).resolve().parent
assert Path(sys.path[0]).resolve() == HERE, sys.path
del sys.path[0]
spec = importlib.util.spec_from_file_location("smoke", HERE / "__init__.py", submodule_search_locations=[str(HERE)])
assert spec is not None
assert spec.loader is not None
sys.modules["smoke"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules["smoke"])
importlib.import_module("smoke.run").main()
