"""The machine config of one process group of a ``bodega.toml``, as the Machines API takes it.

Every machine carries metadata naming its process group and release
(``fly_process_group``, ``fly_release_version``: the keys flyctl uses), which is
how a later deploy finds the machines of each group and status shows releases.
A section naming no ``processes`` is for the default group only (``app``, else
the first by name), and a ``[[vm]]`` naming none for every group, as flyctl
flattens them. A group's command is the image's CMD replaced (``init.cmd``,
so its ENTRYPOINT still runs, as on Fly), or the whole command the process
driver runs (``init.exec``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from bodega.deploy.core.config import PROCESS_IMAGE, AppConfig, Experimental, gigabytes
from bodega.deploy.core.fly_services import Concurrency as TomlConcurrency
from bodega.deploy.core.fly_services import HttpService, TomlCheck
from bodega.deploy.core.machine_keys import GROUP_KEY as GROUP_KEY
from bodega.deploy.core.machine_keys import RELEASE_KEY as RELEASE_KEY
from bodega.model.errors import validation_message
from bodega.model.machine_config import (
    Autostop,
    Concurrency,
    File,
    Guest,
    Init,
    MachineConfig,
    MachineMetrics,
    Mount,
    Port,
    Restart,
    Service,
    StopConfig,
)
from bodega.model.statics import Static

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


def services(config: AppConfig, group: str) -> list[Service]:
    out: list[Service] = []
    http = config.http_service
    if http is not None and config.applies(http.processes, group):
        options = _options(http)
        out.append(Service(
            protocol="tcp", internal_port=http.internal_port,
            autostart=http.auto_start_machines, autostop=_autostop(http.auto_stop_machines),
            min_machines_running=http.min_machines_running,
            ports=[options.model_copy(update={"port": 80, "handlers": ["http"],
                                              "force_https": http.force_https}),
                   options.model_copy(update={"port": 443, "handlers": ["tls", "http"]})],
            concurrency=_concurrency(http.concurrency),
            checks=[_http(c).check(http.internal_port) for c in http.checks] or None))
    for service in config.services:
        if not config.applies(service.processes, group):
            continue
        checks = [c.check(service.internal_port) for c in service.tcp_checks] + [
            _http(c).check(service.internal_port) for c in service.http_checks]
        out.append(Service(
            protocol=service.protocol, internal_port=service.internal_port,
            autostart=service.auto_start_machines,
            autostop=_autostop(service.auto_stop_machines),
            min_machines_running=service.min_machines_running,
            ports=[Port.model_validate(p.model_dump(exclude_none=True)) for p in service.ports],
            concurrency=_concurrency(service.concurrency), checks=checks or None))
    return out


def _options(http: HttpService) -> Port:
    """http_service's TLS and HTTP options, as each of its ports carries them."""
    return Port.model_validate(http.model_dump(include={"tls_options", "http_options"},
                                               exclude_none=True))


def _concurrency(concurrency: TomlConcurrency | None) -> Concurrency | None:
    if concurrency is None:
        return None
    return Concurrency(type=concurrency.type, soft_limit=concurrency.soft_limit,
                       hard_limit=concurrency.hard_limit)


def _http(check: TomlCheck) -> TomlCheck:
    """http_service.checks and services.http_checks are HTTP checks whatever ``type`` says."""
    return check.model_copy(update={"type": "http"})


def _autostop(value: bool | Autostop) -> Autostop:
    if isinstance(value, bool):
        return "stop" if value else "off"
    return value


def guest(config: AppConfig, group: str) -> Guest:
    """The group's own ``[[vm]]``, else one naming no group, else shared-cpu-1x."""
    mine = [vm for vm in config.vm if vm.processes and group in vm.processes]
    every = [vm for vm in config.vm if not vm.processes]
    for vm in mine + every:
        try:
            return vm.guest()
        except ValidationError as exc:
            raise refused(group, exc, "guest") from None
    return Guest(cpu_kind="shared", cpus=1, memory_mb=256)


def init(config: AppConfig, group: str, command: list[str] | None) -> Init | None:
    """What the machine runs: the group's command (the process driver's whole command, or
    an image's CMD), else ``[experimental]``'s, with its entrypoint; swap as asked."""
    experimental = config.experimental or Experimental()
    if config.process_driver:
        run = Init(exec=command or experimental.exec or experimental.cmd)
    else:
        run = Init(cmd=command or experimental.cmd, entrypoint=experimental.entrypoint,
                   exec=experimental.exec)
    run = run.model_copy(update={"swap_size_mb": config.swap_size_mb})
    return run if run.model_dump(exclude_none=True) else None


def restart(config: AppConfig, group: str) -> Restart:
    """The group's last ``[[restart]]`` (flyctl's ``never`` is the API's ``no``), else a
    failed machine is started again up to ten times."""
    rules = [r for r in config.restart if config.applies(r.processes, group)]
    if not rules:
        return Restart(policy="on-failure", max_retries=10)
    rule = rules[-1]
    return Restart(policy="no" if rule.policy == "never" else rule.policy,
                   max_retries=rule.retries)


def stop_config(config: AppConfig) -> StopConfig | None:
    if config.kill_signal is None and config.kill_timeout is None:
        return None
    return StopConfig(signal=config.kill_signal, timeout=config.kill_timeout)


def statics(config: AppConfig) -> list[Static]:
    """Every group's machines get the app's statics, as flyctl gives them; none for an app
    run as processes (no image) and none of a Tigris bucket (``unserved_statics``)."""
    if config.process_driver:
        return []
    return [Static(guest_path=s.guest_path, url_prefix=s.url_prefix,
                   index_document=s.index_document)
            for s in config.statics if not s.tigris_bucket]


def metrics(config: AppConfig, group: str) -> MachineMetrics | None:
    """The group's ``[metrics]`` endpoint, as Fly keeps it in the machine config: the first
    that names the group, or names none (flyctl's: every group then; one endpoint per
    machine)."""
    for entry in config.metrics:
        if not entry.processes or group in entry.processes:
            return MachineMetrics(port=entry.port, path=entry.path, https=entry.https)
    return None


def files(config: AppConfig, group: str, base_dir: Path | None,
          read: Callable[[Path], bytes]) -> list[File] | None:
    """The group's ``[[files]]`` (``fly_files``), a local one read with ``read``: an image
    machine's only (a host process has no root of its own to write them in)."""
    mine = [(i, f) for i, f in enumerate(config.files) if config.applies(f.processes, group)]
    if mine and config.process_driver:
        raise ValueError(f"process group {group!r}: [[files]] need an image machine (give "
                         "[build] image or a Dockerfile); a host process has no root of its "
                         "own to write them in")
    return [f.machine_file(i, base_dir, read) for i, f in mine] or None


def refused(group: str, exc: ValidationError, where: str = "") -> ValueError:
    """A group's config the Machines API would refuse, said as it would say it."""
    return ValueError(f"process group {group!r}: {validation_message(exc, where)}")


def machine_config(config: AppConfig, group: str, release: int,
                   base_dir: Path | None = None,
                   read: Callable[[Path], bytes] = Path.read_bytes) -> MachineConfig:
    """The config a machine of ``group`` gets in release ``release``; ``read`` reads a
    ``[[files]]`` entry's ``local_path`` (``LocalFileError`` when it cannot).

    A bodega.toml that makes a config the Machines API would refuse (a memory size
    that is not a multiple of 128 MB) is a ``ValueError`` naming the group and the field.
    """
    command = argv(config, group, base_dir)
    run = init(config, group, command)
    if config.process_driver and (run is None or not run.exec):
        raise ValueError(f"process group {group!r} has no image and no command: put a "
                         "Dockerfile beside the config (or name one in [build] dockerfile), "
                         "give [build] image or --image, or a [processes] command to run "
                         "as a process")
    try:
        return MachineConfig(
            image=config.build.image or PROCESS_IMAGE,
            guest=guest(config, group),
            # PRIMARY_REGION as flyctl sets it: the proxy keeps min_machines_running there.
            env={**({"PRIMARY_REGION": config.primary_region} if config.primary_region else {}),
                 **config.env},
            metadata={GROUP_KEY: group, RELEASE_KEY: str(release)},
            restart=restart(config, group),
            init=run,
            stop_config=stop_config(config),
            services=services(config, group) or None,
            checks={name: c.check() for name, c in config.checks.items()
                    if config.applies(c.processes, group)} or None,
            mounts=[Mount(volume=m.source, path=m.destination, name=m.source,
                          size_gb=gigabytes(m.initial_size) if m.initial_size else None)
                    for m in config.mounts if config.applies(m.processes, group)] or None,
            files=files(config, group, base_dir, read),
            statics=statics(config) or None,
            metrics=metrics(config, group),
        )
    except ValidationError as exc:
        raise refused(group, exc) from None


def has_checks(config: MachineConfig) -> bool:
    return bool(config.checks) or any(s.checks for s in config.services or [])
