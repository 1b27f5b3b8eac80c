"""A broker that remembers where a machine or volume was finds it where it moved to.

Another broker moved it (``broker/machines/moves.py``): this one's remembered worker
answers 404 for the machine, and the view's row, written by its new worker, says where
it is now; a volume's row of a newer generation does the same before any call.
"""

from __future__ import annotations

from typing import Any, cast

from bodega.broker.machines.service import Machines
from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import MemoryCatalog
from bodega.broker.view.workers import Workers
from bodega.broker.volumes.service import Volumes


def views() -> tuple[MemoryCatalog, Workers, Apps]:
    catalog = MemoryCatalog()
    catalog.put("apps", "a", {"name": "a", "org_slug": "personal"})
    return catalog, Workers(catalog, Candidates(catalog), None), Apps(catalog)


async def test_a_machine_that_moved_is_found_on_its_new_worker() -> None:
    catalog, workers, apps = views()
    machines = Machines(catalog, workers.candidates, workers, apps)
    workers.remember("m1", "w1")
    catalog.put("machines", "m1", {"id": "m1", "app": "a", "name": "m", "region": "ams",
                                   "worker": "w2", "state": "started", "generation": 1})
    assert machines.moved_from("a", "m1", "w1") == "w2"
    assert workers.locate("machines", "m1", "a") == "w2"  # remembered from now on
    assert machines.moved_from("a", "m1", "w2") is None  # no move: the 404 stands
    assert machines.moved_from("b", "m1", "w1") is None  # another app's
    await workers.aclose()


async def test_a_volume_that_moved_is_found_on_its_new_worker() -> None:
    catalog, workers, apps = views()
    volumes = Volumes(catalog, workers, cast(Any, None), apps, cast(Any, None), "ams",
                      answer_within=1.0)
    workers.remember("vol_1", "w1")
    row = {"id": "vol_1", "app": "a", "name": "data", "region": "ams", "worker": "w2",
           "state": "created"}
    catalog.put("volumes", "vol_1", row)
    assert volumes.locate("a", "vol_1") == "w1"  # no newer generation: as remembered
    catalog.put("volumes", "vol_1", {**row, "generation": 1})
    assert volumes.locate("a", "vol_1") == "w2"
    await workers.aclose()
