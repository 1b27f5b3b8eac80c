"""HAProxy kept in step with the routing table: the control loop of the data plane.

    routing table changes ─▶ wanted_servers (by tier) ─▶ plan ─▶ runtime commands (no reload)
                                                    └▶ render + seamless reload (new shape)
    every STATS_INTERVAL ─▶ show stat ─▶ StatsLoad (autostop), metrics, wake if over soft limit

A machine takes a slot once its port has accepted a connect from here (``admission.py``).

The edge rides along: certificates and the alias and force_https maps
(``edge.py``) and TCP listeners (``tcp_plane.py``) change through the same
runtime API, a new TCP listener by a reload.

The decisions are the pure functions of ``layout`` and ``config``; this
module only does their I/O. A command HAProxy refuses, or an HAProxy that
died, leads to a full render: the config always carries the whole layout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import replace
from pathlib import Path

from bodega.proxy.core.balance import choose, usable
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.sites import SiteStore
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.figures import AppFigures
from bodega.proxy.haproxy.admission import Admission
from bodega.proxy.haproxy.core.config import HaproxySettings, render, render_hosts
from bodega.proxy.haproxy.core.edge import (
    Site,
    Step,
    aliases,
    cert_file,
    cert_steps,
    map_steps,
    render_crt_list,
    render_map,
    static_prefixes,
)
from bodega.proxy.haproxy.core.layout import (
    EMPTY,
    AppServers,
    Layout,
    Plan,
    backend_name,
    far_name,
    host_key,
    plan,
    settled,
    wanted_servers,
)
from bodega.proxy.haproxy.core.replay_action import render_lua
from bodega.proxy.haproxy.observed import HaproxyCollector, StatsLoad
from bodega.proxy.haproxy.runtime import RuntimeApi, RuntimeUnavailable, StatRow
from bodega.proxy.haproxy.supervisor import HaproxyFailed, HaproxyProcess
from bodega.proxy.haproxy.tcp_plane import TcpPlane
from bodega.proxy.wake import Waker

log = logging.getLogger("bodega.proxy.haproxy")

STATS_INTERVAL = 1.0
RESTART_BACKOFF = 1.0


class HaproxyDataPlane:
    def __init__(self, binary: str, workdir: Path, settings: HaproxySettings,
                 table: RoutingTable, region: str, waker: Waker | None = None,
                 sites: SiteStore | None = None, tcp: TcpPlane | None = None,
                 statics: StaticsTable | None = None) -> None:
        self.settings = settings
        self.table = table
        self.region = region
        self.waker = waker
        self.api = RuntimeApi(settings.socket_path)
        self.process = HaproxyProcess(binary, workdir, self.api)
        self.layout: Layout = EMPTY
        self.load = StatsLoad(time.monotonic)
        self.collector = HaproxyCollector()
        self.figures: AppFigures | None = None  # the fly_app_* series, fed each look
        self._rng = random.Random()  # choose's ties: the wake rule reads only its band
        self._changed = asyncio.Event()
        self._lock = asyncio.Lock()
        self.admission = Admission(self._changed.set)
        self._tasks: list[asyncio.Task[None]] = []
        table.on_change(self._changed.set)
        self.tcp = tcp
        if tcp is not None:
            tcp.tcp.on_change(self._changed.set)
        self.sites = sites
        if sites is not None:
            sites.on_change(self._changed.set)
        self.statics = statics
        if statics is not None:
            statics.on_change(self._changed.set)
        # What HAProxy holds of the edge: certificates (hostname -> fingerprint), map entries.
        self.certs_loaded: dict[str, str] = {}
        self.maps_loaded: dict[str, dict[str, str]] = {}

    async def start(self) -> None:
        wanted = await self._wanted()
        self.layout = self._plan(EMPTY, wanted).layout
        if self.tcp is not None:
            await self.tcp.prepare(self.tcp.step())
        await self.process.start(*self._rendered())
        self._tasks = [asyncio.create_task(self._follow()),
                       asyncio.create_task(self._watch_stats())]

    async def _wanted(self) -> dict[str, AppServers]:
        wanted = wanted_servers(self.table.apps(), self.table.backends,
                                self.table.worker_alive, self.region)
        return await self.admission.admit(wanted, self.layout)

    def _plan(self, current: Layout, wanted: dict[str, AppServers]) -> Plan:
        return plan(current, wanted, str(self.settings.hosts_map), self.settings.base_domain)

    def _edge(self) -> tuple[dict[str, Site], dict[str, dict[str, str]]]:
        """The certificates to serve (none without a TLS listener) and the edge's maps."""
        s = self.settings
        sites = (dict(self.sites.sites) if self.sites is not None and s.default_cert is not None
                 else {})
        apps = self.table.apps()
        hosts = {app: host_key(app, s.base_domain) for app in apps}
        https = {hosts[app]: "1" for app in apps if s.tls_port and self.table.force_https(app)}
        prefixes = self.statics.prefixes() if self.statics is not None else {}
        statics = static_prefixes(prefixes, {app: host_key(app, s.base_domain)
                                             for app in prefixes})
        return sites, {str(s.aliases_map): aliases(sites, hosts), str(s.https_map): https,
                       str(s.statics_map): statics}

    def _rendered(self) -> tuple[str, tuple[tuple[Path, str], ...]]:
        """The config and the files beside it; what HAProxy then holds is all of it."""
        s = self.settings
        sites, maps = self._edge()
        crt_list = str(s.crt_list) if s.default_cert is not None else None
        tcp = self.tcp.render(crt_list) if self.tcp is not None else []
        files = [(s.hosts_map, render_hosts(self.layout, s.base_domain)),
                 (s.replay_lua, render_lua(f"{s.activator_host}:{s.activator_port}")),
                 *((Path(path), render_map(entries)) for path, entries in maps.items())]
        if s.default_cert is not None:
            certs = str(s.certs_dir)
            files += [(Path(cert_file(certs, h)), site.pem) for h, site in sites.items()]
            files.append((s.crt_list, render_crt_list(str(s.default_cert), sites, certs)))
        self.certs_loaded = {h: site.fingerprint for h, site in sites.items()}
        self.maps_loaded = maps
        return render(self.layout, s) + "".join(f"{line}\n" for line in tcp), tuple(files)

    async def _sync_edge(self) -> list[str]:
        """Certificates and map entries that changed, through the runtime API (no reload)."""
        s = self.settings
        sites, maps = self._edge()
        steps: list[Step] = []
        for path, entries in maps.items():
            steps += map_steps(path, self.maps_loaded.get(path, {}), entries)
        if s.default_cert is not None:
            steps += cert_steps(self.certs_loaded, sites, str(s.crt_list), str(s.certs_dir))
        errors: list[str] = []
        for step in steps:
            errors += (await self.api.send([step.command]) if step.payload is None
                       else await self.api.send_payload(step.command, step.payload))
        if steps:
            await asyncio.to_thread(self._keep_files, sites, maps)
            log.info("edge: %d certificate(s), %d change(s) through the runtime API",
                     len(sites), len(steps))
        self.certs_loaded = {h: site.fingerprint for h, site in sites.items()}
        self.maps_loaded = maps
        return errors

    def _keep_files(self, sites: dict[str, Site], maps: dict[str, dict[str, str]]) -> None:
        """The files a later reload or restart reads: the same as what HAProxy holds now."""
        s = self.settings
        for map_path, entries in maps.items():
            Path(map_path).write_text(render_map(entries))
        if s.default_cert is not None:
            certs = str(s.certs_dir)
            s.certs_dir.mkdir(mode=0o700, exist_ok=True)
            kept = {Path(cert_file(certs, h)) for h in sites}
            for path in s.certs_dir.glob("*.pem"):
                if path not in kept:
                    path.unlink()
            for hostname, site in sites.items():
                path = Path(cert_file(certs, hostname))
                path.touch(mode=0o600)
                path.write_text(site.pem)
            s.crt_list.write_text(render_crt_list(str(s.default_cert), sites, certs))

    async def sync(self) -> None:
        """Bring HAProxy to the routing table now (tests await this after a change)."""
        async with self._lock:
            self._changed.clear()
            wanted = await self._wanted()
            step = self._plan(self.layout, wanted)
            if step.reload and self.layout.leaving and self.process.running:
                # Slots still leaving at the last look may have no session open now: look
                # again before growing the shape for want of them.
                self._settle(await self.api.stats())
                step = self._plan(self.layout, wanted)
            tcp = self.tcp
            tcp_step = tcp.step() if tcp is not None else None
            reload = step.reload or not self.process.running or bool(tcp_step and
                                                                     tcp_step.reload)
            if reload:
                if tcp is not None and tcp_step is not None:
                    await tcp.prepare(tcp_step)
                await self._reload(step.layout)
                return
            errors: list[str] = []
            commands = step.commands + (tcp_step.commands if tcp_step else ())
            if commands:
                errors = await self.api.send(commands)
                self.layout = step.layout
                if tcp is not None and tcp_step is not None:
                    tcp.layout = tcp_step.layout
            errors += await self._sync_edge()
            if errors:
                log.warning("haproxy refused %d command(s) (%s); rendering it all anew",
                            len(errors), errors[0])
                await self._reload(step.layout)

    async def _reload(self, layout: Layout) -> None:
        self.layout = layout
        was_running = self.process.running
        await self.process.reload(*self._rendered())
        if not was_running:
            self.process.restarts += 1
            log.warning("haproxy was not running: started it again")
        else:
            log.info("haproxy reloaded for a new shape: %d app(s), %d backend(s), %d slot(s)",
                     len(layout.apps), len(layout.backends),
                     sum(len(s) for s in layout.backends))

    async def _follow(self) -> None:
        while True:
            await self._changed.wait()
            try:
                await self.sync()
            except (RuntimeUnavailable, HaproxyFailed) as exc:
                log.error("could not update haproxy: %s", exc)
                self._changed.set()
                await asyncio.sleep(RESTART_BACKOFF)

    async def _watch_stats(self) -> None:
        while True:
            await asyncio.sleep(STATS_INTERVAL)
            if not self.process.running:
                log.error("haproxy exited (%s); starting it again", self.process.process and
                          self.process.process.returncode)
                self._changed.set()
                continue
            try:
                await self.observe()
            except RuntimeUnavailable as exc:
                log.info("no stats from haproxy this time: %s", exc)

    async def observe(self) -> None:
        """One look at HAProxy's counters: load per machine, metrics, wake if all are busy."""
        rows = await self.api.stats()
        by_server = {(r.proxy, r.server): r for r in rows}
        servers: dict[tuple[str, str], tuple[str, str]] = {}
        machines: dict[str, StatRow] = {}
        # A machine changing tier is in two slots for a moment, one leaving: both count.
        for key, (app, machine_id) in self.layout.counted().items():
            if key in by_server:
                servers[key] = (app, machine_id)
                machines[machine_id] = _merged(machines.get(machine_id), by_server[key])
        if self.tcp is not None:  # a machine's TCP connections are load too (autostop)
            for (name, server), machine_id in self.tcp.servers().items():
                if (row := by_server.get((name, server))) is not None:
                    machines[machine_id] = _merged(machines.get(machine_id), row)
        self._settle(rows)
        self.load.observe(machines)
        apps = {name(index): app for app, index in self.layout.apps.items()
                for name in (backend_name, far_name)}
        self.collector.update(rows, servers, apps, self.process.reloads)
        if self.figures is not None:
            self.figures.observe_haproxy(rows, servers, apps, self.process.reloads,
                                         self._tcp_servers())
        self._wake_if_over_soft_limit()

    def _settle(self, rows: list[StatRow]) -> None:
        """Leaving slots with no session open in ``rows`` are free again (``settled``)."""
        self.layout = settled(self.layout, {(row.proxy, row.server): row.current + row.queued
                                            for row in rows})

    def _tcp_servers(self) -> dict[tuple[str, str], tuple[str, str]]:
        """(backend, server) -> (app, machine) of the slots of the TCP services' listeners."""
        if self.tcp is None:
            return {}
        apps = {b.machine_id: b.app for app in self.tcp.tcp.apps()
                for b in self.tcp.tcp.machines(app)}
        return {key: (apps[machine_id], machine_id)
                for key, machine_id in self.tcp.servers().items() if machine_id in apps}

    def _wake_if_over_soft_limit(self) -> None:
        """fly-proxy starts another machine when every one a request could go to is past its
        soft limit: the rule of the Python data plane's choice (``balance.choose``)."""
        if self.waker is None:
            return
        for app in self.table.apps():
            backends = self.table.backends(app)
            if not any(b.autostart for b in backends) or not any(
                    usable(b, self.table.worker_alive) for b in backends):
                continue
            if choose(backends, self.load.outstanding, self.region, self.table.worker_alive,
                      self._rng).over_soft:
                self.waker.wake(app)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.admission.stop()
        await self.process.stop()


def _merged(one: StatRow | None, other: StatRow) -> StatRow:
    """A machine's counters over its HTTP and TCP servers together."""
    if one is None:
        return other
    return replace(one, current=one.current + other.current, total=one.total + other.total,
                   queued=one.queued + other.queued)
