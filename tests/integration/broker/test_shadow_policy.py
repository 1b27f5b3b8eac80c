"""A shadow policy is ranked and logged beside the live one and never moves a machine."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bodega.worker.store import queries

from .broker_kit import in_process_cluster, machine

BIG = {"config": {"guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 4096}}}


async def _place(tmp: Path, creates: int, **broker: Any) -> list[str]:
    """Create machines on a small (16 GB) and a big (64 GB) worker; where each landed."""
    async with in_process_cluster(tmp) as c:
        await c.add_worker("ams-1", memory_mb=16384)
        await c.add_worker("ams-2", memory_mb=65536)
        c.follow()
        await c.add_broker(policy="spread", **broker)
        landed: list[str] = []
        async with c.api() as api:
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            for _ in range(creates):
                created = await api.post("/v1/apps/web/machines", json=machine(**BIG))
                assert created.status_code == 200, created.text
                machine_id = created.json()["id"]
                landed += [w.config.name for w in c.workers
                           if any(m.id == machine_id for m in queries.list_machines(w.store.db))]
                c.sync()  # the next create sees this one: the same view in both clusters
        if broker.get("shadow_sample") == 1.0:  # every create is shadowed, and counted
            agree = c.brokers[0].metrics.shadow_decisions.labels("agree")._value.get()
            differ = c.brokers[0].metrics.shadow_decisions.labels("differ")._value.get()
            assert agree + differ == creates
        return landed


def _shadow_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    prefix = "placement shadow "
    return [json.loads(r.getMessage()[len(prefix):]) for r in caplog.records
            if r.name == "bodega.broker.placing.shadow" and r.getMessage().startswith(prefix)]


async def test_both_decisions_are_logged_with_their_subscores(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bodega.broker.placing.shadow")
    landed = await _place(tmp_path, 1, shadow_policy="binpack", shadow_sample=1.0)
    # Spread (live) sends 4 GB to the big, empty worker; bin-pack (shadow) would have filled
    # the small one first. The machine is where the live policy put it.
    assert landed == ["ams-2"]
    [entry] = _shadow_lines(caplog)
    assert entry["app"] == "web"
    assert entry["asked"]["memory_mb"] == 4096
    assert entry["placed"] == "ams-2"
    assert (entry["live"]["policy"], entry["live"]["choice"]) == ("spread", "ams-2")
    assert (entry["shadow"]["policy"], entry["shadow"]["choice"]) == ("binpack", "ams-1")
    assert entry["agree"] is False
    shadow_ranked = {r["worker"]: r for r in entry["shadow"]["ranked"]}
    live_ranked = {r["worker"]: r for r in entry["live"]["ranked"]}
    assert set(shadow_ranked) == set(live_ranked) == {"ams-1", "ams-2"}
    assert "binpack" in shadow_ranked["ams-1"]["subscores"]
    assert "spread" in live_ranked["ams-2"]["subscores"]
    # Scored on the view before the create counted: ams-1 at 4 of 16 GB, ams-2 at 4 of 64.
    assert shadow_ranked["ams-1"]["score"] > shadow_ranked["ams-2"]["score"]


async def test_the_shadow_changes_nothing_and_only_samples(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bodega.broker.placing.shadow")
    without = await _place(tmp_path / "plain", 5)
    assert _shadow_lines(caplog) == []
    shadowed = await _place(tmp_path / "shadowed", 5, shadow_policy="binpack",
                            shadow_sample=1.0)
    assert shadowed == without
    assert len(_shadow_lines(caplog)) == 5
    caplog.clear()
    await _place(tmp_path / "none", 3, shadow_policy="binpack", shadow_sample=0.0)
    assert _shadow_lines(caplog) == []


def test_a_bad_shadow_is_refused_before_anything_starts(tmp_path: Path) -> None:
    from bodega.broker.config import BrokerConfig
    from bodega.broker.metrics import BrokerMetrics
    from bodega.broker.placing.core.shadow import Shadow

    config = BrokerConfig(name="b", data_dir=tmp_path, shadow_policy="katamari")
    with pytest.raises(ValueError, match="unknown placement policy 'katamari'"):
        config.shadow_placement_policy()
    assert BrokerConfig(name="b", data_dir=tmp_path).shadow_placement_policy() \
        is None
    policy = BrokerConfig(name="b", data_dir=tmp_path, sample=2,
                          shadow_policy="binpack").shadow_placement_policy()
    assert policy is not None
    assert (policy.name, policy.sample) == ("binpack+p2c", 2)  # the live one's sampling
    with pytest.raises(ValueError, match="between 0 and 1"):
        Shadow(policy, 1.5, BrokerMetrics())


async def test_fgd_in_shadow_shows_the_hole_the_live_curves_would_take(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A broker running the default curves ranks fgd beside them on its own traffic: the log
    shows where fgd would have put each machine, and why, before anyone switches."""
    caplog.set_level(logging.INFO, logger="bodega.broker.placing.shadow")
    eight = {"config": {"guest": {"cpu_kind": "performance", "cpus": 8, "memory_mb": 16384}}}
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1", cpus=16, memory_mb=65536)
        await c.add_worker("ams-2", cpus=7, memory_mb=28672)
        c.follow()
        await c.add_broker(shadow_policy="fgd", shadow_sample=1.0)
        async with c.api() as api:
            for app in ("web", "api"):
                await api.post("/v1/apps", json={"app_name": app, "org_slug": "personal"})
            # A performance-8x (only ams-1 fits it), then another app's shared cpu (of the
            # same app, it would go to ams-2 anyway: an app spreads first).
            for app, body in (("web", eight), ("api", {})):
                created = await api.post(f"/v1/apps/{app}/machines", json=machine(**body))
                assert created.status_code == 200, created.text
                c.sync()  # the next create sees this one, however soon it comes
    first, second = _shadow_lines(caplog)
    assert (first["live"]["policy"], first["shadow"]["policy"]) == ("utility", "fgd")
    assert first["agree"] is True  # ams-2 has 7 cpus: the 8x has one place to go
    # ams-1 is left with the region's only 8 free cpus. The curves want it (half used beats
    # nearly idle); one create in two has been an 8x, so fgd keeps that hole and would send
    # the shared cpu to ams-2. The live policy still decides: it went to ams-1.
    assert second["placed"] == "ams-1"
    assert (second["live"]["choice"], second["shadow"]["choice"]) == ("ams-1", "ams-2")
    assert second["agree"] is False
    shadow_ranked = {r["worker"]: r for r in second["shadow"]["ranked"]}
    assert shadow_ranked["ams-1"]["subscores"]["fragmentation"] < -0.9
    assert "fragmentation" not in shadow_ranked["ams-2"]["subscores"]
