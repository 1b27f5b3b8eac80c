"""The worker's shape: a few modules at its top, the rest in wings, and the core's folder is
its boundary (``docs/worker.md``, "The code in wings")."""

from __future__ import annotations

from pathlib import Path

import grimp

import bodega.worker

WORKER = Path(bodega.worker.__file__).parent


def test_at_most_twelve_modules_sit_at_the_top_of_the_worker() -> None:
    top = sorted(path.name for path in WORKER.glob("*.py"))
    assert len(top) <= 12, top


def test_the_core_imports_nothing_of_the_worker_outside_its_folder() -> None:
    # Imports made only for type checking count: a core that names a shell's type depends on it.
    graph = grimp.build_graph("bodega", cache_dir=None)
    core = {name for name in graph.modules
            if name == "bodega.worker.core" or name.startswith("bodega.worker.core.")}
    reached: set[str] = set()
    for name in core:
        reached |= graph.find_upstream_modules(name)
    outside = sorted(name for name in reached - core
                     if name.startswith("bodega.") and not name.startswith("bodega.model"))
    assert outside == [], f"the worker's core reaches beyond core/ and model/: {outside}"
