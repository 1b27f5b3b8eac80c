"""The local cluster supervisor: start every component, restart what crashes, stop it all.

This is the supervisor the article starts from, grown up a little: each
component is a separate OS process with its own log file; one that exits on
its own is restarted with a backoff; ``cluster.json`` always lists what runs
now (pid and url). A stop is of bodega alone, or of bodega and its machines
(``stop(machines=...)``: SIGTERM and SIGINT of ``bodega up``/``join``): the
workers are told so by the signal they get (SIGTERM: machines stay, SIGINT: they
stop), and only once machines were stopped does it sweep every kernel object
carrying the cluster id (``cleanup.py``). As it starts it sweeps only what
belongs to no worker it is about to start: a machine an earlier run left
running (a SIGTERM, a SIGKILL, a crash) is its worker's to re-adopt, and a
worker takes up what its own earlier run left. What
the components are, and how each is started, is ``components.py``. Before a
component starts, the supervisor gives it a certificate for its identity from
the cluster CA (``authority``), unless it holds a good one already (one it
renewed itself, say). Components are forked by a fork server that has imported
bodega once (``forkserver.py``: the modules' pages are shared between them),
unless the config says not to; one the fork server cannot make is started the
usual way.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import time
from pathlib import Path

from bodega.cluster import cleanup
from bodega.cluster.components import Component, component_env
from bodega.cluster.config import ClusterConfig
from bodega.cluster.forked import ForkedProcess, ForkServer, ForkUnavailable
from bodega.cluster.readiness import NotReady, judge, observe
from bodega.cluster.stored_cluster import HostWorker
from bodega.runtime.lifecycle import SUPERVISOR_PID, private_dir, write_json_atomic
from bodega.runtime.ready import Ready
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core.access import METRICS_STORE
from bodega.runtime.tls.core.identity import Identity
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.waits import within

log = logging.getLogger("bodega.cluster")

READY_TIMEOUT = 30.0
STOP_GRACE = 20.0
MAX_BACKOFF = 30.0
# What the cluster runs without when it will not start: the metrics store.
OPTIONAL = frozenset({METRICS_STORE})
FORKS_RETRY = 30.0  # seconds between starts of a fork server that would not start


class StartFailed(RuntimeError):
    """A component exited, or never became ready, while starting: one line with its log."""


class LocalCluster:
    def __init__(self, config: ClusterConfig, components: list[Component],
                 authority: CertificateAuthority | None = None, *,
                 sweep_kernel: bool = True) -> None:
        """``sweep_kernel``: remove every kernel object of the cluster id as it starts and
        stops (``bodega up``); a joined host's workers each remove what they made instead."""
        self.config = config
        self.sweep_kernel = sweep_kernel
        self.components = components
        self.authority = authority
        self.stopping = asyncio.Event()
        self._watchers: list[asyncio.Task[None]] = []
        # Set once no component of an earlier run is left: from then on, what carries the
        # cluster id on the host is this run's to sweep.
        self._sweeps = False
        self._forks: ForkServer | None = None
        self._forks_lock = asyncio.Lock()
        self._forks_retry_at = 0.0

    @property
    def state_file(self) -> Path:
        return self.config.data_dir / "cluster.json"

    def write_state(self) -> None:
        write_json_atomic(
            self.state_file,
            {
                "api_url": f"http://{self.config.host}:{self.config.api_port}",
                "proxy_url": f"http://{self.config.host}:{self.config.proxy_port}",
                **({"proxy_tls_url": f"https://{self.config.host}:{self.config.proxy_tls_port}"}
                   if self.config.proxy_tls_port and self.config.proxy_tls_cert else {}),
                "components": [c.to_json() for c in self.components],
                **({"fork_server": {"pid": self._forks.process.pid}}
                   if self._forks is not None and self._forks.alive else {}),
            },
        )

    def _issue(self, component: Component) -> None:
        if component.tls_dir is None:
            return
        if self.authority is None:
            raise StartFailed(f"{component.role} {component.name} needs a certificate and "
                              "this cluster has no CA")
        identity = Identity(self.config.trust_domain, component.role, component.name)
        if self.authority.issue(TlsDir(component.tls_dir), identity, self.hosts()):
            log.info("issued %s a certificate", identity)

    def hosts(self) -> tuple[str, ...]:
        """The addresses components serve their internal listeners on, for their certificates."""
        return tuple(sorted({self.config.host, "127.0.0.1", "localhost"}))

    async def _spawn(self, component: Component) -> None:
        self._issue(component)
        component.ready_file.unlink(missing_ok=True)
        component.log_file.parent.mkdir(parents=True, exist_ok=True)
        with component.log_file.open("ab") as log_out:
            env = component_env(os.environ, component.role, self.config)
            component.process = await self._launch(component, env, log_out.fileno())
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
        ready = Ready.read(component.ready_file)
        component.url = ready.url
        component.info = ready.listed()
        for warning in ready.warnings:
            log.warning("%s %s: %s", component.role, component.name, warning)
        log.info("%s %s ready at %s (pid %s)", component.role, component.name, component.url,
                 component.process.pid)
        self.write_state()

    async def _launch(self, component: Component, env: dict[str, str],
                      log_fd: int) -> asyncio.subprocess.Process | ForkedProcess:
        forks = await self._fork_server()
        if forks is not None:
            try:
                return await forks.spawn(
                    component.argv, {**env, SUPERVISOR_PID: str(os.getpid())}, Path.cwd(),
                    log_fd)
            except ForkUnavailable as exc:
                log.warning("%s %s starts without the fork server: %s", component.role,
                            component.name, exc)
        return await asyncio.create_subprocess_exec(
            *component.argv, stdout=log_fd, stderr=log_fd, stdin=asyncio.subprocess.DEVNULL,
            env=env)

    async def _fork_server(self) -> ForkServer | None:
        """The fork server, started (again, if it died: at most every ``FORKS_RETRY``
        seconds); None when components start as programs of their own."""
        if not self.config.fork_server or self.stopping.is_set():
            return None
        async with self._forks_lock:
            if self._forks is not None and self._forks.alive:
                return self._forks
            if time.monotonic() < self._forks_retry_at:
                return None
            if self._forks is not None:
                await self._forks.stop()  # reaped: it died (its components run on)
                log.warning("the fork server exited; starting it again")
            logs = self.config.data_dir / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            try:
                self._forks = await ForkServer.start(
                    logs / "fork-server.log",
                    component_env(os.environ, "fork-server", self.config))
            except ForkUnavailable as exc:
                self._forks, self._forks_retry_at = None, time.monotonic() + FORKS_RETRY
                log.warning("%s; components start as programs of their own", exc)
            return self._forks

    async def start(self) -> None:
        private_dir(self.config.data_dir)
        await self._until_earlier_run_gone()
        self._sweeps = True
        await self._sweep_strays()
        await self._fork_server()
        for role in ("registry", "agent", "worker", "broker", "proxy", METRICS_STORE):
            group = [c for c in self.components if c.role == role]
            await asyncio.gather(*(self._spawn_optional(c) if c.role in OPTIONAL
                                   else self._spawn(c) for c in group))
        self._watchers = [asyncio.create_task(self._watch(c)) for c in self.components
                          if c.process is not None]

    async def _spawn_optional(self, component: Component) -> None:
        """An optional component that will not start is said once; the cluster runs on
        without it, and its watcher starts it again (with the usual backoff)."""
        try:
            await self._spawn(component)
        except StartFailed as exc:
            log.warning("%s; the cluster runs without it and starts it again", exc)

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

    async def stop(self, *, machines: bool = True) -> None:
        """Stop every component, a stage at a time, then SIGKILL stragglers: the front
        (metrics store, proxies, brokers, which need none of each other to stop) side by
        side, then the workers, which publish their last rows through the registry agent
        and registry, stopped last. With ``machines``, the workers stop their machines
        first (they get SIGINT, which they take as Ctrl-C), and what carries the cluster id
        is swept at the end; without, they leave them running (SIGTERM) for the next start
        to re-adopt."""
        self.stopping.set()
        for task in self._watchers:
            task.cancel()
        for roles in ((METRICS_STORE, "proxy", "broker"), ("worker",), ("agent",),
                      ("registry",)):
            group = [c for c in self.components if c.role in roles and c.process]
            for component in group:
                assert component.process is not None
                sig = (signal.SIGINT if component.role == "worker" and machines
                       else signal.SIGTERM)
                if component.process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        component.process.send_signal(sig)
            await asyncio.gather(*(_until_stopped(c) for c in group))
        for component in self.components:
            component.process = None
        if self._forks is not None:
            await self._forks.stop()
            self._forks = None
        self.write_state()
        if machines:
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

    async def _sweep_strays(self) -> None:
        """What carries the cluster id and no worker of this run will take up: the objects
        (machines included) of workers an earlier run of the data dir had and this one has
        not (fewer regions, another machine range)."""
        if not self.config.cluster_id or not self.sweep_kernel:
            return
        kept = tuple(HostWorker(name, ipaddress.ip_network(self.config.worker_subnet(index)))
                     for index, (name, _region) in enumerate(self.config.worker_names()))
        report = await cleanup.sweep_all_but(self.config.data_dir, self.config.cluster_id, kept)
        if report.found:
            log.info("removed %d kernel objects of workers this run does not start (cluster "
                     "%s)", report.found, self.config.cluster_id)
        for problem in report.problems:
            log.warning("could not remove %s", problem)

    async def sweep(self, whose: str) -> None:
        """Remove every kernel object carrying this cluster's id (none are in use now)."""
        if not self.config.cluster_id or not self._sweeps or not self.sweep_kernel:
            return
        report = await cleanup.sweep(self.config.data_dir, self.config.cluster_id)
        if report.found:
            log.info("removed %d kernel objects %s left (cluster %s)", report.found, whose,
                     self.config.cluster_id)
        for problem in report.problems:
            log.warning("could not remove %s", problem)


async def _until_stopped(component: Component) -> None:
    """Wait for a signalled component to exit; one still running after ``STOP_GRACE`` is
    killed."""
    assert component.process is not None
    try:
        await within(component.process.wait(), STOP_GRACE)
    except TimeoutError:
        log.warning("%s %s did not stop in %.0fs; killing it", component.role,
                    component.name, STOP_GRACE)
        with contextlib.suppress(ProcessLookupError):
            component.process.kill()
        await component.process.wait()


def last_error(log_file: Path) -> str:
    """The one-line ``Error: ...`` a component's command printed last, else the exception
    line of the last traceback (an error no one worded), if any."""
    try:
        with log_file.open("rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 16384))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    return said_last(tail.splitlines())


def said_last(lines: list[str]) -> str:
    errors = [line for line in lines if line.startswith("Error: ")]
    if errors:
        return errors[-1].removeprefix("Error: ")
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return ""
    after = lines[starts[-1] + 1:]
    # The frames are indented; the first line that is not names the exception.
    return next((line for line in after if line and not line[0].isspace()), "")
