"""The older shapes of fly.toml, rewritten into the one ``deploy/core/config.py`` reads; pure.

fly.toml has been written by six years of flyctl templates and by hand, and
flyctl reads every shape it ever wrote by rewriting it before it decodes the
file (its ``appconfig`` patches). bodega rewrites the same shapes the same way,
so a file flyctl loads loads here too:

- ``[env]`` as a list of tables, or with numbers and booleans for values: one
  table of strings;
- ``processes`` as a list of ``{name, command}`` (an empty list: none);
- ``[experimental]`` ``cmd``, ``entrypoint`` and ``exec`` as one string: a list
  of words; its ``kill_timeout`` and ``metrics_port``/``metrics_path`` moved to
  the top level and to ``[metrics]``;
- ``[[checks]]`` as a list of named checks: a table by name;
- ``[vm]``, ``[compute]``, ``[[computes]]``: one list ``vm``; ``[mount]`` and
  ``[mounts]`` written as one table: one list ``mounts``; ``[metric]``: ``metrics``;
- ``concurrency = "20,25"`` on a service: requests, soft limit 20, hard 25; ports
  and ``internal_port`` written as strings: numbers;
- check ``interval``, ``timeout`` and ``grace_period`` as integers: milliseconds;
  ``kill_timeout`` as an integer: seconds; check ``headers`` as a list of
  ``{name, value}``: a table;
- ``[build] build_target``: ``build-target``.

A shape that cannot be rewritten (``env = 3``) is a ``ShapeError`` naming the key.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from bodega.model.json import JsonObject

Table = JsonObject  # a TOML table as tomllib gives it: a true JSON-like edge


class ShapeError(ValueError):
    """A value of a shape no fly.toml has: ``key`` names where."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def rewrite(raw: Table) -> Table:
    """``raw`` (as tomllib read it) in the one shape bodega reads; ``raw`` is left as is."""
    out = copy.deepcopy(raw)
    _env(out)
    _services(out)
    _processes(out)
    _experimental(out)
    _top_checks(out)
    _gathered(out, ("compute", "computes", "vm"), "vm")
    _gathered(out, ("mount", "mounts"), "mounts")
    _gathered(out, ("metric", "metrics"), "metrics")
    if "kill_timeout" in out:
        out["kill_timeout"] = go_duration(out["kill_timeout"], MILLI * 1000)
    _build(out)
    for vm in out.get("vm", []):
        if isinstance(vm, dict) and isinstance(vm.get("memory"), int | float):
            vm["memory"] = str(vm["memory"])
    for mount in out.get("mounts", []):
        if isinstance(mount, dict) and isinstance(mount.get("initial_size"), int | float):
            mount["initial_size"] = str(mount["initial_size"])
    return out


MILLI = 1_000_000  # nanoseconds in a millisecond


def go_duration(value: Any, unit_ns: int) -> Any:
    """A number as a duration of ``unit_ns`` nanoseconds each, written as a Go duration
    (``10000`` milliseconds: ``10s``); a string as it is; an empty one: none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None if value == "" else value
    nanos = int(value * unit_ns)
    for unit, size in (("h", 3600 * 10**9), ("m", 60 * 10**9), ("s", 10**9), ("ms", MILLI),
                       ("us", 1000)):
        if nanos and nanos % size == 0:
            return f"{nanos // size}{unit}"
    return f"{nanos}ns"


def _env(out: Table) -> None:
    if "env" in out:
        out["env"] = _env_table(out["env"])


def _env_table(raw: Any) -> dict[str, str]:
    if isinstance(raw, list):
        merged: dict[str, str] = {}
        for item in raw:
            merged.update(_env_table(item))
        return merged
    if isinstance(raw, dict):
        return {key: _text(value) for key, value in raw.items()}
    raise ShapeError("env", f"env must be a table of names to values, not {_kind(raw)}")


def _text(value: Any) -> str:
    """A value as Go's ``%v`` prints it: booleans lower case, numbers as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _processes(out: Table) -> None:
    raw = out.get("processes")
    if isinstance(raw, list):
        named = {_text(item["name"]): _text(item.get("command", ""))
                 for item in raw if isinstance(item, dict) and "name" in item}
        if named:
            out["processes"] = named
        else:
            del out["processes"]
    elif raw is not None and not isinstance(raw, dict):
        raise ShapeError("processes", f"processes must be a table of group = command, not "
                                      f"{_kind(raw)}")


def _experimental(out: Table) -> None:
    raw = out.get("experimental")
    if raw is None:
        return
    if not isinstance(raw, dict):
        raise ShapeError("experimental", f"experimental must be a table, not {_kind(raw)}")
    for key in ("cmd", "entrypoint", "exec"):
        if isinstance(raw.get(key), str):
            raw[key] = shlex.split(raw[key])
    if "kill_timeout" in raw:
        moved = raw.pop("kill_timeout")
        out.setdefault("kill_timeout", moved)
    metrics = {key.removeprefix("metrics_"): raw.pop(key)
               for key in ("metrics_port", "metrics_path") if key in raw}
    if metrics and "metrics" not in out and "metric" not in out:
        out["metrics"] = metrics


def _top_checks(out: Table) -> None:
    raw = out.get("checks")
    if raw is None:
        return
    if isinstance(raw, list):  # [[checks]] with a name each
        named = {}
        for item in raw:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ShapeError("checks", "each [[checks]] needs a name")
            named[item["name"]] = {k: v for k, v in item.items() if k != "name"}
        raw = named
    if not isinstance(raw, dict):
        raise ShapeError("checks", f"checks must be a table of named checks, not {_kind(raw)}")
    for name, check in raw.items():
        if not isinstance(check, dict):
            raise ShapeError(f"checks.{name}", f"checks.{name} must be a table")
        _check(check, f"checks.{name}")
    if raw:
        out["checks"] = raw
    else:
        del out["checks"]


def _check(check: Table, key: str) -> None:
    for field in ("interval", "timeout", "grace_period"):
        if field in check:
            value = go_duration(check[field], MILLI)
            if value is None:
                del check[field]
            else:
                check[field] = value
    if "headers" in check:
        headers = _headers(check["headers"], f"{key}.headers")
        if headers:
            check["headers"] = headers
        else:
            del check["headers"]


def _headers(raw: Any, key: str) -> dict[str, str]:
    if isinstance(raw, dict):
        return {name: _text(value) for name, value in raw.items()}
    if isinstance(raw, list):
        out = {}
        for item in raw:
            if not isinstance(item, dict) or "name" not in item:
                raise ShapeError(key, f"{key}: write a table of header = value")
            out[_text(item["name"])] = _text(item.get("value", ""))
        return out
    raise ShapeError(key, f"{key}: write a table of header = value, not {_kind(raw)}")


def _services(out: Table) -> None:
    if "services" not in out:
        return
    services = _tables(out["services"], "services")
    kept = []
    for index, service in enumerate(services):
        key = f"services.{index}"
        concurrency = service.get("concurrency")
        if isinstance(concurrency, str):
            soft, comma, hard = concurrency.partition(",")
            if not comma or not soft.strip().isdigit() or not hard.strip().isdigit():
                raise ShapeError(f"{key}.concurrency", f"concurrency {concurrency!r}: write "
                                 "\"SOFT,HARD\" or a [services.concurrency] table")
            service["concurrency"] = {"type": "requests", "soft_limit": int(soft),
                                      "hard_limit": int(hard)}
        if "ports" in service:
            service["ports"] = _tables(service["ports"], f"{key}.ports")
            for port in service["ports"]:
                for field in ("port", "start_port", "end_port"):
                    if isinstance(port.get(field), str) and port[field].strip().isdigit():
                        port[field] = int(port[field])
        for kind in ("tcp_checks", "http_checks"):
            if kind in service:
                checks = _tables(service[kind], f"{key}.{kind}")
                for check in checks:
                    _check(check, f"{key}.{kind}")
                if checks:
                    service[kind] = checks
                else:
                    del service[kind]
        internal = service.get("internal_port")
        if isinstance(internal, str) and internal.strip().isdigit():
            service["internal_port"] = int(internal)
        if service:
            kept.append(service)
    out["services"] = kept


def _gathered(out: Table, names: tuple[str, ...], into: str) -> None:
    """Tables written under any of ``names``, as one table or a list: one list ``into``."""
    found = [names for names in names if names in out]
    if not found:
        return
    gathered: list[Table] = []
    for name in found:
        gathered.extend(_tables(out.pop(name), name))
    out[into] = gathered


def _build(out: Table) -> None:
    build = out.get("build")
    if build is None:
        return
    if not isinstance(build, dict):
        raise ShapeError("build", f"build must be a table, not {_kind(build)}")
    if "build_target" in build:
        build.setdefault("build-target", build.pop("build_target"))
    if not build:
        del out["build"]


def _tables(raw: Any, key: str) -> list[Table]:
    """One table or a list of them, as a list."""
    if isinstance(raw, dict):
        return [raw]
    if isinstance(raw, list) and all(isinstance(item, dict) for item in raw):
        return list(raw)
    raise ShapeError(key, f"{key} must be a table or a list of tables, not {_kind(raw)}")


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)
