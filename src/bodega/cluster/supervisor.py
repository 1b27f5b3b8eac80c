"""The local cluster supervisor: start every component, restart what crashes, stop it all.

This is the supervisor the article starts from, grown up a little: each
component is a separate OS process with its own log file; one that exits on
its own is restarted with a backoff; ``cluster.json`` always lists what runs
now (pid and url); SIGINT or SIGTERM stops everything, machines included, and
then sweeps every kernel object carrying the cluster id (``cleanup.py``), as it
does before it starts anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bodega.cluster import cleanup
from bodega.cluster.config import ClusterConfig
from bodega.cluster.readiness import NotReady, judge, observe
from bodega.runtime.lifecycle import private_dir, write_json_atomic

log = logging.getLogger("bodega.cluster")

READY_TIMEOUT = 30.0
STOP_GRACE = 20.0
MAX_BACKOFF = 30.0
SECRET_VARIABLES = ("BODEGA_API_TOKEN", "BODEGA_CLUSTER_SECRET")


@dataclass
class Component:
    role: str
    name: str
    region: str
    argv: list[str]
    ready_file: Path
    log_file: Path
    process: asyncio.subprocess.Process | None = None
    url: str | None = None
    restarts: int = 0
    started_at: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    # The component's own flag -> the ``bodega up`` flag that sets it, to word its errors.
    flags: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role, "name": self.name, "region": self.region,
            "pid": self.process.pid if self.process else None, "url": self.url,
            "restarts": self.restarts, **self.info,
        }


class StartFailed(RuntimeError):
    """A component exited, or never became ready, while starting: one line with its log."""


class LocalCluster:
    def __init__(self, config: ClusterConfig, components: list[Component]) -> None:
        self.config = config
        self.components = components
        self.stopping = asyncio.Event()
        self._watchers: list[asyncio.Task[None]] = []
        # Set once no component of an earlier run is left: from then on, what carries the
        # cluster id on the host is this run's to sweep.
        self._sweeps = False

    @property
    def state_file(self) -> Path:
        return self.config.data_dir / "cluster.json"

    def write_state(self) -> None:
        write_json_atomic(
            self.state_file,
            {
                "api_url": f"http://{self.config.host}:{self.config.api_port}",
                "proxy_url": f"http://{self.config.host}:{self.config.proxy_port}",
                "components": [c.to_json() for c in self.components],
            },
        )

    async def _spawn(self, component: Component) -> None:
        component.ready_file.unlink(missing_ok=True)
        component.log_file.parent.mkdir(parents=True, exist_ok=True)
        with component.log_file.open("ab") as log_out:
            env = component_env(os.environ, component.role, self.config)
            component.process = await asyncio.create_subprocess_exec(
                *component.argv, stdout=log_out, stderr=log_out, stdin=asyncio.subprocess.DEVNULL,
                env=env,
            )
        component.started_at = time.monotonic()
        deadline = time.monotonic() + READY_TIMEOUT
        while not component.ready_file.exists():
            if component.process.returncode is not None:
                said = last_error(component.log_file)
                for own, ours in component.flags.items():
                    said = said.replace(f"with {own}", f"with {ours}")
                raise StartFailed(
                    f"{component.role} {component.name} exited with "
                    f"{component.process.returncode} while starting"
                    + (f" ({said})" if said else "") + f"; see {component.log_file}"
                )
            if time.monotonic() > deadline:
                raise StartFailed(f"{component.role} {component.name} did not become ready "
                                   f"in {READY_TIMEOUT:.0f}s; see {component.log_file}")
            await asyncio.sleep(0.05)
        ready = json.loads(component.ready_file.read_text())
        component.url = ready.get("url")
        component.info = {k: v for k, v in ready.items()
                          if k not in ("url", "pid", "name", "region", "ready")}
        log.info("%s %s ready at %s (pid %s)", component.role, component.name, component.url,
                 component.process.pid)
        self.write_state()

    async def start(self) -> None:
        private_dir(self.config.data_dir)
        await self._until_earlier_run_gone()
        self._sweeps = True
        await self.sweep("an earlier run")
        for role in ("registry", "worker", "broker", "proxy"):
            group = [c for c in self.components if c.role == role]
            await asyncio.gather(*(self._spawn(c) for c in group))
        self._watchers = [asyncio.create_task(self._watch(c)) for c in self.components]

    async def until_ready(self, timeout: float = READY_TIMEOUT) -> NotReady | None:
        """Ready means a create works: the broker says it is ready and sees every worker alive.

        Returns None once it is, or what is still not ready after ``timeout`` seconds.
        """
        broker = next(c for c in self.components if c.role == "broker")
        workers = {c.name: c.log_file for c in self.components if c.role == "worker"}
        deadline = time.monotonic() + timeout
        while True:
            if broker.url is None:  # being restarted: no address to ask yet
                verdict: NotReady | None = NotReady("the broker is restarting", broker.log_file)
            else:
                seen = await observe(broker.url, self.config.token)
                verdict = judge(seen, workers, broker.log_file)
            if verdict is None or time.monotonic() > deadline:
                return verdict
            await asyncio.sleep(0.2)

    async def _watch(self, component: Component) -> None:
        while not self.stopping.is_set():
            assert component.process is not None
            code = await component.process.wait()
            if self.stopping.is_set():
                return
            ran = time.monotonic() - component.started_at
            backoff = 0.5 if ran > 60 else min(MAX_BACKOFF, 0.5 * 2 ** component.restarts)
            component.restarts += 1
            log.warning("%s %s exited with %s; restarting in %.1fs", component.role,
                        component.name, code, backoff)
            await asyncio.sleep(backoff)
            if self.stopping.is_set():
                return
            try:
                await self._spawn(component)
            except StartFailed as exc:
                log.error("%s", exc)

    async def stop(self) -> None:
        """SIGTERM every component (proxies first, workers last), then SIGKILL stragglers."""
        self.stopping.set()
        for task in self._watchers:
            task.cancel()
        for role in ("proxy", "broker", "worker", "registry"):
            group = [c for c in self.components if c.role == role and c.process]
            for component in group:
                assert component.process is not None
                if component.process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        component.process.send_signal(signal.SIGTERM)
            for component in group:
                assert component.process is not None
                try:
                    await asyncio.wait_for(component.process.wait(), STOP_GRACE)
                except TimeoutError:
                    log.warning("%s %s did not stop in %.0fs; killing it", component.role,
                                component.name, STOP_GRACE)
                    with contextlib.suppress(ProcessLookupError):
                        component.process.kill()
                    await component.process.wait()
        for component in self.components:
            component.process = None
        self.write_state()
        await self.sweep("this run")

    async def _until_earlier_run_gone(self) -> None:
        """Components of an earlier run (its ``bodega up`` killed, they stop on their own)
        may still be stopping: let them finish before anything is swept or started."""
        pids = await cleanup.until_components_gone(self.config.data_dir, STOP_GRACE)
        if pids:
            raise StartFailed(
                f"components of an earlier run on {self.config.data_dir} still run (pids "
                f"{', '.join(map(str, pids))}); stop them, or kill them and run "
                f"`bodega clean --data-dir {self.config.data_dir}`")

    async def sweep(self, whose: str) -> None:
        """Remove every kernel object carrying this cluster's id (none are in use now)."""
        if not self.config.cluster_id or not self._sweeps:
            return
        report = await cleanup.sweep(self.config.data_dir, self.config.cluster_id)
        if report.found:
            log.info("removed %d kernel objects %s left (cluster %s)", report.found, whose,
                     self.config.cluster_id)
        for problem in report.problems:
            log.warning("could not remove %s", problem)


def last_error(log_file: Path) -> str:
    """The one-line ``Error: ...`` a component's command printed last, if any."""
    try:
        with log_file.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 4096))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    errors = [line for line in tail.splitlines() if line.startswith("Error: ")]
    return errors[-1].removeprefix("Error: ") if errors else ""


def component_env(inherited: Mapping[str, str], role: str, config: ClusterConfig
                  ) -> dict[str, str]:
    """The environment a component starts with.

    Secrets travel in the environment, never on a command line others can
    read, and each goes only where it is needed: every component gets the
    cluster secret, only the broker the admin token. ``bodega up`` may itself
    have been given the token as ``BODEGA_API_TOKEN``; a worker or a proxy
    that inherited it would hold a key it never uses.
    """
    env = {k: v for k, v in inherited.items() if k not in SECRET_VARIABLES}
    env["BODEGA_CLUSTER_SECRET"] = config.cluster_secret
    if role == "broker":
        env["BODEGA_API_TOKEN"] = config.token
    return env


def bodega_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bodega", *args]


def components_for(config: ClusterConfig) -> list[Component]:
    components = []
    run_dir = config.data_dir / "run"
    logs = config.data_dir / "logs"
    nearest = config.regions[0]
    images: tuple[str, ...] = ()
    if config.registry_port:  # the image registry first: workers pull from it
        registry = f"{config.host}:{config.registry_port}"
        images = ("--image-registry", registry)
        components.append(Component(
            "registry", "registry", nearest,
            bodega_argv("image-registry", "--data-dir", str(config.data_dir / "images"),
                        "--listen", registry, "--ready-file", str(run_dir / "registry.json"),
                        "--exit-with-parent"),
            run_dir / "registry.json", logs / "registry.log",
            flags={"--listen": "--registry-port"}))
    for index, (name, region) in enumerate(config.worker_names()):
        # Every worker gossips on a fixed port; the first joins nobody, each other one
        # joins through those before it, so any of them still up lets a restarted
        # worker back in (the first rejoins through the peers it remembers).
        joins = [config.worker_gossip(i) for i in range(index)]
        argv = bodega_argv(
            "worker", "--name", name, "--region", region,
            "--data-dir", str(config.data_dir / "workers" / name),
            "--listen", f"{config.host}:0", "--driver", config.driver,
            "--cpus", str(config.worker_cpus), "--memory-mb", str(config.worker_memory_mb),
            "--disk-gb", str(config.worker_disk_gb),
            "--machine-subnet", config.worker_subnet(index),
            *(("--cluster-id", config.cluster_id) if config.cluster_id else ()),
            "--stop-machines-on-exit", "--exit-with-parent",
            "--ready-file", str(run_dir / f"{name}.json"), "--log-level", config.log_level,
            "--gossip-listen", config.worker_gossip(index),
            *(("--join", ",".join(joins)) if joins else ()), *images,
            *config.extra_worker_args,
        )
        components.append(Component("worker", name, region, argv, run_dir / f"{name}.json",
                                    logs / f"{name}.log",
                                    flags={"--gossip-listen": "--gossip-port",
                                           "--machine-subnet": "--machine-cidr"}))
    seeds = ",".join(config.worker_gossip(i) for i in range(config.worker_count))
    # One broker and one proxy, in the first region, joined to the workers' gossip.
    for role, port, extra, flag in (
            ("broker", config.api_port, config.extra_broker_args, "--api-port"),
            ("proxy", config.proxy_port, config.extra_proxy_args, "--proxy-port")):
        argv = bodega_argv(
            role, "--name", role, "--region", nearest,
            "--data-dir", str(config.data_dir / role),
            "--listen", f"{config.host}:{port}",
            "--gossip-listen", config.gossip(role), "--join", seeds,
            "--exit-with-parent", "--ready-file", str(run_dir / f"{role}.json"),
            "--log-level", config.log_level, *extra,
            # The broker tells clients where the registry is (GET /v1/cluster).
            *(images if role == "broker" else ()),
        )
        components.append(Component(role, role, nearest, argv, run_dir / f"{role}.json",
                                    logs / f"{role}.log",
                                    flags={"--listen": flag, "--gossip-listen": "--gossip-port"}))
    return components
