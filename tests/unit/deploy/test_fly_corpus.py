"""Real fly.toml files, read as a deploy reads them (``bodega config validate``'s check).

The corpus (``tests/data/fly-toml``) is flyctl's own fixtures and files from public
repositories, each naming its source on its first line. Every one that flyctl would
deploy is valid here too; the few that are not are refused for a reason flyctl shares
or one no deploy survives, listed below. A dozen have their machine config checked key
by key: the keys that change what runs act.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bodega.deploy.core.config_check import Checked, check
from bodega.deploy.core.fly_keys import FLY_ONLY

CORPUS = Path(__file__).parents[2] / "data" / "fly-toml"
FILES = sorted(CORPUS.glob("*/*.toml"))
IMAGE = "registry.example/app:1"  # as `bodega deploy --image` gives one

# File -> the start of its first error, and why bodega is right to refuse it.
REFUSED = {
    # flyctl's fixture of a file no version of it parses (a bare number for concurrency).
    "always-invalid-v2.toml": "services.0.concurrency: Input should be a valid dictionary",
    # flyctl's reference of every key, values chosen to be silly ("donuts"), which
    # `fly config validate` refuses too (its deploy strategy "rolling-eyes").
    "full-reference.toml": "http_service.concurrency.type: Input should be",
    # flyctl's fixture for validation errors: an initial_size nobody can parse.
    "validate-mounts.toml": "mounts.1.initial_size: size 'unparseable'",
    # A service with no internal_port: flyctl sends port 0, which no machine listens on.
    "setters-service.toml": "services.0.internal_port: required",
}

# Keys in the corpus that flyctl's config does not have either: a warning each.
NOT_FLYCTL_KEYS = {"services.tcp_checks.restart_limit", "services.http_checks.restart_limit",
                   "services.script_checks", "http_service.enable_ha", "redis", "scale",
                   "mounts.encrypted", "services.ports.protocol"}


def checked(path: Path) -> Checked:
    names_app = re.search(r"^\s*app\s*=", path.read_text(), re.MULTILINE) is not None
    return check(path, app=None if names_app else "corpus-app", image=IMAGE)


def test_the_corpus_holds_flyctls_fixtures_and_thirty_real_files_each_naming_its_source() -> None:
    assert len(list(CORPUS.glob("flyctl/*.toml"))) >= 30
    assert len(list(CORPUS.glob("real/*.toml"))) >= 30
    for path in FILES:
        assert path.read_text().startswith("# source: github.com/"), path


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_every_file_a_deploy_could_run_is_valid(path: Path) -> None:
    result = checked(path)
    if path.name in REFUSED:
        assert not result.ok
        assert f"{result.errors[0].key}: {result.errors[0].message}".startswith(
            REFUSED[path.name]), result.errors
        return
    assert result.ok, [str(e) for e in result.errors]
    for note in result.warnings:
        assert note.line >= 1, note
        table, _, key = re.sub(r"\.\d+", "", note.key).rpartition(".")
        if note.message.startswith("unknown key"):
            assert f"{table}.{key}".lstrip(".") in NOT_FLYCTL_KEYS, note
        elif note.message.startswith("not served: "):  # a static of a Tigris bucket
            assert (table, key) == ("statics", "tigris_bucket"), note
        else:  # flyctl's own key, with the reason bodega leaves it
            assert key in FLY_ONLY[".".join(p for p in table.split(".")
                                            if not p.startswith("checks."))], note


def machine(name: str, group: str = "app") -> dict[str, Any]:
    (path,) = CORPUS.glob(f"*/{name}")
    result = checked(path)
    assert result.ok, [str(e) for e in result.errors]
    return result.machines[group].model_dump(exclude_none=True)


def test_statics_go_to_every_groups_machines_and_one_of_a_tigris_bucket_is_left_out() -> None:
    for group in ("web", "worker"):  # the http_service's group and the other
        spec = machine("ujh--fountainpencompanion--fly.toml", group)
        assert spec["statics"] == [
            {"guest_path": "/app/public/assets", "url_prefix": "/assets"},
            {"guest_path": "/app/public/images", "url_prefix": "/images"}]
    (path,) = CORPUS.glob("*/tomachine.toml")
    result = checked(path)
    assert all("statics" not in m.model_dump(exclude_none=True)
               for m in result.machines.values())
    (note,) = [n for n in result.warnings if n.key.startswith("statics")]
    assert (note.key, note.line) == ("statics.0.tigris_bucket", 52)
    assert note.message.startswith("not served: bodega has no object storage")


def test_an_old_services_file_stops_with_its_signal_checks_every_15s_and_mounts_a_volume() -> None:
    spec = machine("actualbudget--actual-server--fly.toml")  # flyctl's 2022 template
    assert spec["stop_config"] == {"signal": "SIGINT", "timeout": "5s"}  # kill_timeout = 5
    assert spec["mounts"] == [{"volume": "rcactual_data", "path": "/data",
                               "name": "rcactual_data"}]  # [mounts] written as one table
    (service,) = spec["services"]
    assert service["internal_port"] == 5006
    assert service["concurrency"] == {"type": "connections", "soft_limit": 20, "hard_limit": 25}
    assert service["checks"] == [{"type": "tcp", "port": 5006, "interval": "15s",
                                  "timeout": "2s", "grace_period": "1s"}]
    assert [p["port"] for p in service["ports"]] == [80, 443]
    assert service["ports"][0]["force_https"] is True


def test_the_legacy_mount_and_intervals_in_milliseconds_and_ports_as_strings() -> None:
    spec = machine("fly-apps--grafana--fly.toml")
    assert spec["mounts"] == [{"volume": "grafana_storage", "path": "/var/lib/grafana",
                               "name": "grafana_storage"}]
    (service,) = spec["services"]
    assert [p["port"] for p in service["ports"]] == [80, 443]  # port = "80"
    assert service["checks"][0]["interval"] == "10s"  # interval = 10000
    assert service["checks"][0]["timeout"] == "2s"


def test_experimental_cmd_and_entrypoint_start_the_image_and_http_checks_keep_their_path() -> None:
    spec = machine("remix-run--indie-stack--fly.toml")
    assert spec["init"] == {"cmd": ["start.sh"], "entrypoint": ["sh"]}
    (service,) = spec["services"]
    http = [c for c in service["checks"] if c["type"] == "http"]
    assert http == [{"type": "http", "port": 8080, "interval": "10s", "timeout": "2s",
                     "grace_period": "5s", "method": "get", "path": "/healthcheck",
                     "protocol": "http", "tls_skip_verify": False}]


def test_flyctls_experimental_fixture_moves_kill_timeout_and_runs_exec() -> None:
    spec = machine("experimental-alt.toml")
    assert spec["init"] == {"exec": ["exec"], "cmd": ["cmd"], "entrypoint": ["entrypoint"]}
    assert spec["stop_config"] == {"timeout": "3s"}


def test_memory_mb_wins_and_a_group_named_by_http_service_gets_it() -> None:
    spec = machine("0camm--discord-verify-bot--fly.toml")
    assert spec["guest"] == {"cpu_kind": "shared", "cpus": 1, "memory_mb": 1024}
    assert spec["services"][0]["internal_port"] == 3000
    assert spec["services"][0]["autostop"] is True  # "stop", as the Machines API writes it


def test_two_groups_each_get_their_vm_and_only_web_gets_the_http_service() -> None:
    web = machine("ujh--fountainpencompanion--fly.toml", "web")
    worker = machine("ujh--fountainpencompanion--fly.toml", "worker")
    assert web["init"] == {"cmd": ["bundle", "exec", "puma"], "swap_size_mb": 512}
    assert worker["init"] == {"cmd": ["bundle", "exec", "sidekiq"], "swap_size_mb": 512}
    assert (web["guest"]["cpus"], web["guest"]["memory_mb"]) == (2, 512)
    assert (worker["guest"]["cpus"], worker["guest"]["memory_mb"]) == (1, 512)
    (service,) = web["services"]
    assert service["autostop"] == "suspend"  # the wire's bool is for "stop" only
    assert service["min_machines_running"] == 6
    assert service["checks"][0]["path"] == "/"
    assert "services" not in worker


def test_a_top_level_check_keeps_its_headers_and_rails_server_is_the_cmd() -> None:
    spec = machine("antoinekc--hotefinder--fly.toml")
    assert spec["init"] == {"cmd": ["bin/rails", "server"]}
    assert spec["checks"]["status"]["headers"] == [{"name": "X-Forwarded-Proto",
                                                    "values": ["https"]}]
    assert spec["guest"]["memory_mb"] == 1024  # memory = '1gb'


def test_env_as_a_list_of_tables_with_numbers_and_booleans() -> None:
    assert machine("env-list.toml")["env"] == {"FOO": "BAR", "TWO": "2", "TRUE": "true"}


def test_a_restart_section_sets_the_policy_and_none_keeps_bodegas_default() -> None:
    assert machine("tomachine.toml")["restart"] == {"policy": "always"}
    assert machine("env-list.toml")["restart"] == {"policy": "on-failure", "max_retries": 10}


def test_an_image_with_no_command_keeps_its_own_and_a_builder_is_a_warning() -> None:
    (path,) = CORPUS.glob("real/amoeba--ac-server-monitor--fly.toml")  # builtin = "go"
    result = checked(path)
    assert result.ok
    assert "build.builtin" in [n.key for n in result.warnings]
    assert "init" not in result.machines["app"].model_dump(exclude_none=True)
