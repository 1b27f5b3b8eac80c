"""The older shapes of fly.toml, each rewritten into the one bodega reads (as flyctl does)."""

from __future__ import annotations

import pytest

from bodega.deploy.core.fly_shapes import ShapeError, go_duration, rewrite


def test_numbers_become_go_durations_in_their_unit() -> None:
    milli = 1_000_000
    assert go_duration(10000, milli) == "10s"
    assert go_duration(1500, milli) == "1500ms"
    assert go_duration(120000, milli) == "2m"
    assert go_duration(5, 1000 * milli) == "5s"
    assert go_duration("15s", milli) == "15s"
    assert go_duration("", milli) is None


def test_every_older_shape_is_rewritten() -> None:
    raw = {
        "kill_timeout": 5,
        "env": [{"A": "1"}, {"B": 2, "C": True}],
        "processes": [{"name": "web", "command": "run web"}, {"name": "worker"}],
        "experimental": {"cmd": "a b", "kill_timeout": 9, "metrics_port": 9091},
        "checks": [{"name": "alive", "interval": 2000}],
        "compute": {"memory": 512}, "vm": [{"cpus": 2, "processes": ["web"]}],
        "mount": {"source": "data", "destination": "/data", "initial_size": 3},
        "build": {"build_target": "prod"},
        "services": [{"internal_port": "8080", "concurrency": "20,25",
                      "ports": {"port": "80"},
                      "tcp_checks": {"interval": 15000, "headers": [{"name": "X", "value": 1}]},
                      "http_checks": []}],
    }
    out = rewrite(raw)
    assert out == {
        "kill_timeout": "5s",  # the top level's wins over [experimental]'s
        "env": {"A": "1", "B": "2", "C": "true"},
        "processes": {"web": "run web", "worker": ""},
        "experimental": {"cmd": ["a", "b"]},
        "metrics": [{"port": 9091}],
        "checks": {"alive": {"interval": "2s"}},
        "vm": [{"memory": "512"}, {"cpus": 2, "processes": ["web"]}],
        "mounts": [{"source": "data", "destination": "/data", "initial_size": "3"}],
        "build": {"build-target": "prod"},
        "services": [{"internal_port": 8080,
                      "concurrency": {"type": "requests", "soft_limit": 20, "hard_limit": 25},
                      "ports": [{"port": 80}],
                      "tcp_checks": [{"interval": "15s", "headers": {"X": "1"}}]}],
    }
    assert raw["kill_timeout"] == 5  # the file's own table is left as read


def test_an_empty_processes_list_means_no_groups() -> None:
    assert rewrite({"app": "x", "processes": []}) == {"app": "x"}


@pytest.mark.parametrize(("raw", "key"), [
    ({"env": 3}, "env"),
    ({"services": [{"internal_port": 1, "concurrency": "20"}]}, "services.0.concurrency"),
    ({"checks": [{"interval": "1s"}]}, "checks"),
    ({"mounts": "data"}, "mounts"),
])
def test_a_shape_no_fly_toml_has_names_its_key(raw: dict[str, object], key: str) -> None:
    with pytest.raises(ShapeError) as caught:
        rewrite(raw)
    assert caught.value.key == key
