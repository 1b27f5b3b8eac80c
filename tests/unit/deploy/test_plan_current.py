"""The planner leaves machines already on the release's config alone (as flyctl skips them).

The machines here carry configs as the API answers them: the release's config read
back through ``MachineConfig`` (``autostop`` as a bool, guest defaults filled in), so
a comparison that forgot what the platform rewrites would see a change everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bodega.deploy.core.config import AppConfig, parse
from bodega.deploy.core.drift import differences, image_identity
from bodega.deploy.core.machine_spec import GROUP_KEY, RELEASE_KEY, has_checks, machine_config
from bodega.deploy.core.plan import (
    STRATEGIES,
    Create,
    Current,
    Desired,
    Destroy,
    Plan,
    Relabel,
    Update,
    plan,
)
from bodega.model.machine_config import MachineConfig

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "hello" / "bodega.toml"


def app(**env: str) -> AppConfig:
    """examples/hello's config with some of its [env] values replaced."""
    lines = EXAMPLE.read_text().splitlines()
    for key, value in env.items():
        lines = [f'  {key} = "{value}"' if line.strip().startswith(f"{key} =") else line
                 for line in lines]
    return parse("\n".join(lines) + "\n")[0]


def desired(config: AppConfig, release: int) -> list[Desired]:
    spec = machine_config(config, "app", release)
    return [Desired(group="app", config=spec, has_services=True, has_checks=has_checks(spec))]


def served(config: MachineConfig, **extra: Any) -> MachineConfig:
    """The config as a machine's GET answers it (read back as the client reads it)."""
    return conf({**config.to_wire(), **extra})


def conf(wire: dict[str, Any]) -> MachineConfig:
    return MachineConfig.model_validate(wire)


def on(mid: str, config: AppConfig, release: int, state: str = "started",
       crashed: bool = False) -> Current:
    return Current(id=mid, group="app", state=state, region="ams", crashed=crashed,
                   config=served(machine_config(config, "app", release)))


def updated(p: Plan) -> list[str]:
    return [a.id for s in p.stages for a in s.actions if isinstance(a, Update)]


def relabelled(p: Plan) -> dict[str, dict[str, str]]:
    return {a.id: a.metadata for s in p.stages for a in s.actions if isinstance(a, Relabel)}


def test_an_unchanged_redeploy_restarts_nothing_and_only_relabels() -> None:
    v1 = app()
    current = [on("m1", v1, 1), on("m2", v1, 1)]
    p = plan(desired(v1, 2), current, strategy="rolling")
    assert updated(p) == []
    assert [(s.id, s.region) for s in p.skipped] == [("m1", "ams"), ("m2", "ams")]
    assert [(s.name, s.wait) for s in p.stages] == [("label current machines", False)]
    assert relabelled(p) == {"m1": {RELEASE_KEY: "2"}, "m2": {RELEASE_KEY: "2"}}
    assert p.leases == ["m1", "m2"]


def test_every_strategy_skips_current_machines() -> None:
    v1 = app()
    for strategy in STRATEGIES:
        p = plan(desired(v1, 2), [on("m1", v1, 1)], strategy=strategy)
        assert [s.name for s in p.stages] == ["label current machines"], strategy


def test_a_rollback_replaces_only_the_machines_not_on_the_target_config() -> None:
    # Three machines still run v2's config; one runs the v3 that is being rolled back.
    v2, v3 = app(GREETING="v2"), app(GREETING="v3")
    current = [on("m1", v3, 3), on("m2", v2, 2), on("m3", v2, 2), on("m4", v2, 2)]
    p = plan(desired(v2, 4), current, strategy="rolling")
    assert updated(p) == ["m1"]
    assert [s.id for s in p.skipped] == ["m2", "m3", "m4"]
    assert relabelled(p) == {m: {RELEASE_KEY: "4"} for m in ("m2", "m3", "m4")}
    assert p.stages[-1].name == "label current machines"  # only once m1 is healthy
    assert [s.name for s in p.stages[:-1]] == ["app: update first machine"]


def test_a_changed_env_or_size_updates_every_machine() -> None:
    v1 = app()
    current = [on("m1", v1, 1), on("m2", v1, 1)]
    assert updated(plan(desired(app(GREETING="hi"), 2), current, strategy="rolling")) == [
        "m1", "m2"]
    spec = machine_config(v1, "app", 2)
    spec = conf({**spec.to_wire(), "guest": {**spec.to_wire()["guest"], "memory_mb": 512}})
    grown = [Desired(group="app", config=spec, has_services=True, has_checks=True)]
    assert updated(plan(grown, current, strategy="rolling")) == ["m1", "m2"]


def test_a_machine_that_should_run_but_does_not_is_updated_even_when_current() -> None:
    v1 = app()
    current = [on("m1", v1, 1, state="failed"), on("m2", v1, 1, state="stopped", crashed=True),
               on("m3", v1, 1, state="stopped"), on("m4", v1, 1, state="replacing")]
    p = plan(desired(v1, 2), current, strategy="rolling")
    assert sorted(updated(p)) == ["m1", "m2", "m4"]
    assert [s.id for s in p.skipped] == ["m3"]  # stopped by someone: it rests as it is


def test_a_standby_on_the_release_config_stays_as_it_is() -> None:
    v1 = app()
    primary = on("p1", v1, 1)
    standby = on("s1", v1, 1, state="created")
    standby = standby.model_copy(update={"config": conf({**standby.config.to_wire(),
                                                         "standbys": ["p1"]})})
    p = plan(desired(v1, 2), [primary, standby], strategy="rolling")
    assert updated(p) == []
    assert [s.id for s in p.skipped] == ["p1", "s1"]


def test_bluegreen_replaces_only_stale_machines_and_a_green_stands_by_for_a_kept_primary() -> None:
    v1, v2 = app(), app(GREETING="v2")
    primary = on("p1", v2, 2)
    standby = on("s1", v1, 1, state="created")
    standby = standby.model_copy(update={"config": conf({**standby.config.to_wire(),
                                                         "standbys": ["p1"]})})
    p = plan(desired(v2, 3), [primary, standby], strategy="bluegreen")
    (green,) = [a for a in p.stages[0].actions if isinstance(a, Create)]
    assert (green.ref, green.standby_for, green.config.standbys) == ("green-s1", None, ["p1"])
    assert [a.id for a in p.stages[1].actions if isinstance(a, Destroy)] == ["s1"]
    assert [s.id for s in p.skipped] == ["p1"]


def test_what_the_platform_fills_in_is_no_change_but_every_field_of_the_release_is() -> None:
    spec = machine_config(app(), "app", 7)
    assert differences(served(spec), spec) == []
    assert differences(served(spec, metadata={GROUP_KEY: "app", RELEASE_KEY: "1"}), spec) == []
    assert differences(served(spec, metadata={GROUP_KEY: "app", RELEASE_KEY: "1",
                                              "owner": "team-a"}), spec) == ["metadata"]
    assert differences(served(spec, restart={"policy": "no"}), spec) == ["restart"]
    assert differences(conf({k: v for k, v in served(spec).to_wire().items() if k != "checks"}),
                       conf({**spec.to_wire(),
                             "checks": {"alive": {"type": "tcp", "port": 8080}}})) == ["checks"]
    services = served(spec).to_wire()["services"]
    services[0]["internal_port"] = 9090
    assert differences(served(spec, services=services), spec) == ["services"]


def test_an_image_pinned_to_the_same_digest_under_another_tag_is_the_same_image() -> None:
    assert image_identity("127.0.0.1:5050/web:v3@sha256:ab") == "127.0.0.1:5050/web@sha256:ab"
    assert image_identity("127.0.0.1:5050/web@sha256:ab") == "127.0.0.1:5050/web@sha256:ab"
    assert image_identity("web:v3") == "web:v3"
    assert image_identity("127.0.0.1:5050/web:v3") == "127.0.0.1:5050/web:v3"
    assert differences(conf({"image": "r:5/web:v3@sha256:ab"}),
                       conf({"image": "r:5/web:v4@sha256:ab"})) == []
    assert differences(conf({"image": "r:5/web:v3@sha256:ab"}),
                       conf({"image": "r:5/web:v3@sha256:cd"})) == ["image"]
