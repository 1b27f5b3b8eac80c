"""The machine config of one process group of a ``bodega.toml``, as the Machines API takes it.

Every machine carries metadata naming its process group and release
(``fly_process_group``, ``fly_release_version``: the keys flyctl uses), which is
how a later deploy finds the machines of each group and status shows releases.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from bodega.deploy.config import PROCESS_IMAGE, AppConfig, TomlCheck
from bodega.deploy.machine_keys import GROUP_KEY as GROUP_KEY
from bodega.deploy.machine_keys import RELEASE_KEY as RELEASE_KEY

ROLE_KEY = "bodega_deploy_role"  # "canary" on a canary, so a crashed deploy's leftover is known


def argv(config: AppConfig, group: str, base_dir: Path | None) -> list[str] | None:
    """The group's command; for the process driver, paths next to bodega.toml made absolute
    (the worker runs a machine in a directory of its own, so ``app.py`` would not be found)."""
    command = config.processes.get(group)
    if command is None:
        return None
    words = shlex.split(command)
    if config.process_driver and base_dir is not None:
        words = [str((base_dir / w).resolve()) if not w.startswith("-") and "/" not in w[:1]
                 and (base_dir / w).is_file() else w for w in words]
    return words


def _applies(processes: list[str] | None, group: str) -> bool:
    return not processes or group in processes


def services(config: AppConfig, group: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    http = config.http_service
    if http is not None and group == config.groups[0]:
        out.append({
            "protocol": "tcp", "internal_port": http.internal_port,
            "autostart": http.auto_start_machines, "autostop": _autostop(http.auto_stop_machines),
            "min_machines_running": http.min_machines_running,
            "ports": [{"port": 80, "handlers": ["http"], "force_https": http.force_https},
                      {"port": 443, "handlers": ["tls", "http"]}],
            **({"concurrency": http.concurrency.model_dump(exclude_none=True)}
               if http.concurrency else {}),
            **({"checks": [_http(c).wire(http.internal_port) for c in http.checks]}
               if http.checks else {})})
    for service in config.services:
        if not _applies(service.processes, group):
            continue
        checks = [c.wire(service.internal_port) for c in service.tcp_checks] + [
            _http(c).wire(service.internal_port) for c in service.http_checks]
        out.append({
            "protocol": service.protocol, "internal_port": service.internal_port,
            "autostart": service.auto_start_machines,
            "autostop": _autostop(service.auto_stop_machines),
            "min_machines_running": service.min_machines_running,
            "ports": [p.model_dump(exclude_none=True) for p in service.ports],
            **({"concurrency": service.concurrency.model_dump(exclude_none=True)}
               if service.concurrency else {}),
            **({"checks": checks} if checks else {})})
    return out


def _http(check: TomlCheck) -> TomlCheck:
    """http_service.checks and services.http_checks are HTTP checks whatever ``type`` says."""
    return check.model_copy(update={"type": "http"})


def _autostop(value: bool | str) -> str:
    if isinstance(value, bool):
        return "stop" if value else "off"
    return value


def guest(config: AppConfig, group: str) -> dict[str, Any]:
    for vm in config.vm:
        if _applies(vm.processes, group):
            return vm.guest()
    return {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}


def machine_config(config: AppConfig, group: str, release: int,
                   base_dir: Path | None = None) -> dict[str, Any]:
    """The config a machine of ``group`` gets in release ``release``."""
    out: dict[str, Any] = {
        "image": config.build.image or PROCESS_IMAGE,
        "guest": guest(config, group),
        # PRIMARY_REGION as flyctl sets it: the proxy keeps min_machines_running there.
        "env": {**({"PRIMARY_REGION": config.primary_region} if config.primary_region else {}),
                **config.env},
        "metadata": {GROUP_KEY: group, RELEASE_KEY: str(release)},
        "restart": {"policy": "on-failure", "max_retries": 10},
    }
    command = argv(config, group, base_dir)
    if command:
        out["init"] = {"exec": command}
    elif config.process_driver:
        raise ValueError(f"process group {group!r} has no command: the process driver runs "
                         "[processes] commands (or set [build] image)")
    if found := services(config, group):
        out["services"] = found
    checks = {name: c.wire() for name, c in config.checks.items()
              if _applies(c.processes, group)}
    if checks:
        out["checks"] = checks
    mounts = [{"volume": m.source, "path": m.destination, "name": m.source}
              for m in config.mounts if _applies(m.processes, group)]
    if mounts:
        out["mounts"] = mounts[:1]
    return out


def has_checks(machine_config_: dict[str, Any]) -> bool:
    return bool(machine_config_.get("checks")) or any(
        s.get("checks") for s in machine_config_.get("services") or [])
