"""Each pure core loads first and alone: a module in a folder named ``core`` imports in a
fresh interpreter, whatever the packages above it import in their ``__init__``.

A package's ``__init__`` runs before any of its modules. One that imports its shells
eagerly can close a circle the import graph does not show (a core imports a sibling
room's core, whose package ``__init__`` imports a shell, which imports the first core
back: ``ImportError: ... partially initialized module``), and whether it fails depends on
which module a process loads first. One child process loads each core module in turn,
after dropping every bodega module loaded before it but the shared model and placement
(the layers contract keeps them importing nothing above them, so no circle runs
through them; dropping them too would only make the test slower).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

LOAD_EACH_FIRST = """
import importlib, json, sys
failed = {}
kept = ("bodega.model", "bodega.placement")
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "bodega" or m.startswith("bodega.")]:
        if not any(loaded == k or loaded.startswith(k + ".") for k in kept):
            del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed[name] = repr(error)
print(json.dumps(failed))
"""


def core_modules() -> list[str]:
    found = []
    for path in sorted((SRC / "bodega").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if path.name == "__init__.py":
            parts = parts[:-1]
        if "core" in parts:
            found.append(".".join(parts))
    return found


def test_every_core_module_loads_first_in_a_fresh_interpreter() -> None:
    modules = core_modules()
    assert "bodega.worker.core.rules" in modules
    done = subprocess.run([sys.executable, "-c", LOAD_EACH_FIRST, json.dumps(modules)],
                          capture_output=True, text=True, check=True)
    failed = json.loads(done.stdout)
    assert not failed, ("core modules that fail when a process loads them first:\n"
                        + "\n".join(f"  {m}: {e}" for m, e in sorted(failed.items())))
