"""Each pure core loads first and alone: a module in a folder named ``core`` imports in a
fresh interpreter, whatever the packages above it import in their ``__init__``.

A package's ``__init__`` runs before any of its modules. One that imports its shells
eagerly can close a circle the import graph does not show (a core imports a sibling
room's core, whose package ``__init__`` imports a shell, which imports the first core
back: ``ImportError: ... partially initialized module``), and whether it fails depends on
which module a process loads first.

One child process loads the shared model and placement (the layers contract keeps them
importing nothing above them, so no circle runs through them), then each core module
first, in a process of its own forked from one that has imported exactly the packages
above it: importing ``a.b.c`` first runs ``a``'s ``__init__``, then ``a.b``'s, then
``a.b.c`` itself, and a fork of a process that ran the first two starts where a fresh
one would be after them. So each package's ``__init__`` runs once, not once per core
below it (164 cores under packages that import 150 to 900 modules took 35 s of CPU).
Each core module says whether it loaded; one that says nothing counts as failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

LOAD_EACH_FIRST = """
import importlib, json, os, sys

def say(name, error):
    os.write(1, (json.dumps([name, error]) + "\\n").encode())

def load_first(prefix, names):
    # ``prefix`` is imported in this process; each name below it is loaded in a fork
    # of a process that imported the package on its way (and nothing else).
    ways = {}
    for name in names:
        step = prefix + "." + name[len(prefix) + 1:].split(".")[0]
        ways.setdefault(step, []).append(name)
    for step, below in ways.items():
        pid = os.fork()
        if pid == 0:
            try:
                try:
                    importlib.import_module(step)
                except Exception as error:
                    for name in below:  # each would import ``step`` first, and fail so
                        say(name, repr(error))
                else:
                    if step in below:
                        say(step, None)
                    load_first(step, [name for name in below if name != step])
            finally:
                os._exit(0)
        os.waitpid(pid, 0)

for shared in ("bodega.model", "bodega.placement"):
    importlib.import_module(shared)
load_first("bodega", json.loads(sys.argv[1]))
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
    said = dict(json.loads(line) for line in done.stdout.splitlines())
    failed = {m: said.get(m, "said nothing") for m in modules if said.get(m, "") is not None}
    assert not failed, ("core modules that fail when a process loads them first:\n"
                        + "\n".join(f"  {m}: {e}" for m, e in sorted(failed.items())))
