"""A running broker: the registry node it reads, the services on it, and the HTTP server.

The broker keeps nothing on disk that matters: its registry replica is a
cache any peer can refill, so a broker killed at any instant and started
again (or another broker beside it) answers exactly as before.

It listens twice: the public Machines API (bearer tokens) and an internal
listener for members (mutual TLS: ``internal.py``), which is the address its
registry node publishes. Its calls to workers present its certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute

from bodega.broker.auth.core.oidc import OidcKey
from bodega.broker.auth.tokens import Tokens
from bodega.broker.autoscale.evaluator import Evaluator
from bodega.broker.certificates.defaults import DefaultCertificates
from bodega.broker.certificates.store import AppCertificates
from bodega.broker.config import BrokerConfig
from bodega.broker.internal import internal_app
from bodega.broker.jobs import Assignment, Claims, JobDesk, jobs_routes
from bodega.broker.machines.create import MachineCreate
from bodega.broker.machines.service import Machines
from bodega.broker.machines.standby_watch import StandbyWatch
from bodega.broker.metrics import BrokerMetrics
from bodega.broker.placing.core.shadow import Shadow
from bodega.broker.placing.placer import Placer, PlacerConfig
from bodega.broker.platform.service import Platform
from bodega.broker.prometheus.core.peers import STORE_FLAG, store_peers
from bodega.broker.prometheus.routes import internal_routes
from bodega.broker.prometheus.store import MetricsStore
from bodega.broker.secrets.keys import AppSecretKeys
from bodega.broker.secrets.store import AppSecrets
from bodega.broker.server import BrokerApi
from bodega.broker.trust.join_book import JoinStore
from bodega.broker.trust.listener import serve_joins
from bodega.broker.ui import Dashboard
from bodega.broker.view.apps import Apps
from bodega.broker.view.candidates import Candidates
from bodega.broker.view.catalog import Catalog
from bodega.broker.view.readiness import Gate
from bodega.broker.view.workers import Workers
from bodega.broker.volumes.service import Volumes
from bodega.jobs.passes import JobPasses
from bodega.model.errors import BodegaError
from bodega.registry.agent.member_tls import SIGNER, certificate_meta, renewal
from bodega.registry.api import RegistryQueries
from bodega.runtime.identity_keys import identity_keys
from bodega.runtime.machine_tokens import MachineTokens
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.tls.authority import CertificateAuthority, utc_now
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import BROKER_INTERNAL
from bodega.runtime.tls.files import CaDir, TlsDir
from bodega.runtime.tls.renewal import LocalSigner
from bodega.wire.public.cluster_info import ClusterInfo
from bodega.wire.transport.peer_access import PeerAccess

log = logging.getLogger("bodega.broker")


class Broker:
    def __init__(self, config: BrokerConfig, catalog: Catalog | None = None) -> None:
        self.config = config
        self.metrics = BrokerMetrics()
        self.catalog = catalog
        self.node: Any = None
        self.served: Served | None = None
        self.internal: Served | None = None
        self.joins: Served | None = None  # the join listener (trust/listener.py)
        self.dashboard: Dashboard | None = None
        self.queries: RegistryQueries | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.tls = (InternalTls(TlsDir(config.tls_dir), self.metrics.registry)
                    if config.tls_dir is not None else None)
        self.authority: CertificateAuthority | None = None
        if config.ca_dir is not None:
            self.authority = CertificateAuthority.load(CaDir(config.ca_dir),
                                                       lifetime=config.cert_lifetime)
            if self.tls is not None and self.authority.cert != self.tls.ca:
                raise ValueError(f"the CA in {config.ca_dir} is not the one this broker's "
                                 f"certificate chains to ({config.tls_dir}/ca.pem)")
        self.join_store: JoinStore | None = None  # the join book, in the view
        self.metrics_store = MetricsStore(
            config.metrics_store, self._store_peers,
            lambda: self.tls.client if self.tls is not None else None)
        if config.join_host is not None and (self.authority is None or self.tls is None):
            raise ValueError("--join-listen lets hosts join: it needs the cluster CA "
                             "(--ca-dir) and mutual TLS")

    @property
    def url(self) -> str:
        if self.served is None:
            raise RuntimeError("broker is not serving")
        return self.served.url

    @property
    def nearest(self) -> str:
        return self.config.region.split(",")[0].strip() or "any"

    @property
    def internal_url(self) -> str:
        if self.internal is None:
            raise RuntimeError("broker is not serving")
        return self.internal.url

    async def start(self) -> None:
        config = self.config
        sock = bind(config.listen_host, config.listen_port)
        internal_host = config.internal_host or config.listen_host
        internal_sock = bind(internal_host, config.internal_port)
        internal_url = (f"{'https' if self.tls else 'http'}://{internal_host}:"
                        f"{internal_sock.getsockname()[1]}")
        port = int(sock.getsockname()[1])
        registry_routes: list[BaseRoute] = []
        if self.catalog is None:
            self.catalog, registry_routes = await self._join_registry(internal_url)
        catalog = self.catalog
        # The join book is in the view: any broker of a cluster with a CA makes, lists and
        # revokes its tokens (a token pins the CA's certificate, which every member has);
        # servers alone let hosts in.
        ca = (self.authority.cert if self.authority is not None
              else self.tls.ca if self.tls is not None else None)
        if ca is not None:
            self.join_store = JoinStore(catalog, ca, utc_now)
            if config.ca_dir is not None:
                self.join_store.import_file(config.ca_dir)
        self.candidates = Candidates(catalog)
        self.candidates.load()
        self.workers = Workers(catalog, self.candidates, self.tls.client if self.tls else None)
        self.candidates.apps_on = self.workers.index.on_worker
        self.workers.index.on_count = self.candidates.count
        self.workers.load()
        policy = config.placement_policy()
        shadow_policy = config.shadow_placement_policy()
        shadow = (Shadow(shadow_policy, config.shadow_sample, self.metrics)
                  if shadow_policy is not None else None)
        self.placer = Placer(self.candidates, self.workers, policy,
                             PlacerConfig(config.deadline, config.hedge, config.reservation_ttl),
                             self.metrics, config.name, shadow=shadow)
        apps = Apps(catalog)
        machines = Machines(catalog, self.candidates, self.workers, apps)
        creation = MachineCreate(catalog, self.candidates, self.workers, self.placer, apps,
                                 config.region, answer_within=config.create_timeout)
        volumes = Volumes(catalog, self.workers, self.placer, apps, machines, config.region,
                          answer_within=config.create_timeout)
        platform = Platform(catalog, self.candidates, machines, policy, self.nearest)
        self.jobs = JobDesk(catalog, self.candidates, self.workers, self.placer, apps,
                            config.probe_ratio)
        self.jobs.load()
        claims = Claims(self.jobs)
        assignment = Assignment(catalog, self.jobs, claims)
        # Only a broker with a registry node and seeds (or its host's agent, which gossips
        # for it) has a cluster to hear from first.
        self.gate = Gate(seeded=self.node is not None
                         and (bool(config.seeds) or config.registry_agent is not None))
        # A machine's own token and the OIDC signing key come from the secrets key: a broker
        # without one (no secrets) signs no machine identity either.
        identity = identity_keys(config.secrets_key.encode()) if config.secrets_key else None
        self.tokens = Tokens(catalog, config.admin_tokens,
                             MachineTokens(identity.machine_token) if identity else None)
        box = SecretBox(config.secrets_key) if config.secrets_key else None
        certificates = (AppCertificates(catalog, apps, SecretBox(config.certs_key),
                                        self.authority) if config.certs_key else None)
        if certificates is not None and self.authority is not None:
            defaults = DefaultCertificates(catalog, certificates, config.edge_domain)
            self._tasks.append(asyncio.create_task(defaults.run()))
        api = BrokerApi(tokens=self.tokens, apps=apps,
                        machines=machines, creation=creation, volumes=volumes,
                        platform=platform,
                        metrics=self.metrics, name=config.name, gate=self.gate,
                        secrets=AppSecrets(catalog, apps, box) if box else None,
                        secret_keys=AppSecretKeys(catalog, apps, box) if box else None,
                        oidc_key=OidcKey(identity.oidc_seed) if identity else None,
                        info=ClusterInfo(image_registry=config.image_registry,
                                         image_registry_ca=config.image_registry_ca),
                        more=lambda r: jobs_routes(
                            r, self.jobs, claims, assignment,
                            JobPasses(identity.job_pass) if identity else None),
                        keys=self.node.keys if self.node is not None else None,
                        joins=self.join_store, certificates=certificates,
                        metrics_store=self.metrics_store)
        self.standbys = StandbyWatch(
            catalog, lambda worker, mid: self.workers.client(worker).start(mid),
            lambda worker, mid: self.workers.client(worker).stop(mid))
        self._tasks.append(asyncio.create_task(self._follow(catalog)))
        self._tasks.append(asyncio.create_task(self.standbys.run()))
        # Every broker runs the autoscaler's loop; an app's lease says which one acts.
        self.autoscaler = Evaluator(catalog, machines, creation, config.name,
                                    self.metrics_store.ask)
        self._tasks.append(asyncio.create_task(self.autoscaler.run()))
        if not self.gate.ready.is_set():
            self._tasks.append(asyncio.create_task(
                self.gate.watch(catalog, self.node.sync_round, self._reload)))
        self.internal = await serve(
            internal_app(PeerAccess(BROKER_INTERNAL, self.tls), config.name, self.authority,
                         [*registry_routes,
                          *internal_routes(PeerAccess(BROKER_INTERNAL, self.tls), catalog,
                                           self.metrics_store)]),
            internal_host, 0, sock=internal_sock, tls=self.tls)
        if self.tls is not None and self.node is not None:
            signer = LocalSigner(self.authority, self.tls) if self.authority else None
            self._tasks.append(asyncio.create_task(renewal(self.tls, self.node, signer).run()))
        app = api.app()
        if self.node is not None:  # read-only SQL on the registry (the host agent's replica)
            self.queries = RegistryQueries(self.node.view.path, config.data_dir / "queries",
                                           authorize=self._admin)
            await self.queries.start()
            self.node.table_listeners.append(self.queries.changed)
            app.router.routes.extend(self.queries.routes())
        # The dashboard at /ui: it reads this broker's view and acts through its API.
        self.dashboard = Dashboard(catalog, self.tokens, config.listen_host, port,
                                   suspicion_left=self._suspicion_left,
                                   not_ready=lambda: None if self.gate.state.ready
                                   else self.gate.state.why)
        self.placer.refused = self.dashboard.refusals.note
        app.router.routes.extend(self.dashboard.routes())
        self.served = await serve(app, config.listen_host, port, sock=sock)
        if config.join_host is not None:
            assert self.authority is not None
            assert self.tls is not None
            assert self.join_store is not None
            self.joins = await serve_joins(config, self.authority, self.tls, self.join_store,
                                           self.node, self.served.url)
        log.info("broker %s (policy %s) serving on %s; %d workers in %s", config.name,
                 policy.name, self.url, len(self.candidates.all()),
                 ",".join(self.candidates.regions()) or "no region yet")

    def _suspicion_left(self, name: str) -> float | None:
        """Seconds this broker's membership still gives suspect ``name`` to refute."""
        if self.node is None:
            return None
        deadline = self.node.membership.suspicion_deadline(name)
        return None if deadline is None else deadline - asyncio.get_running_loop().time()

    async def until_ready(self) -> None:
        """Return once the broker has heard from the cluster (at once without seeds)."""
        await self.gate.ready.wait()

    def _reload(self) -> None:
        # Rows the first pulls brought may still sit in the change feed: read them now,
        # so the first create after ready sees every worker the view holds.
        self.candidates.load()
        self.workers.load()
        self.standbys.load()
        self.jobs.load()

    async def _join_registry(self, url: str) -> tuple[Catalog, list[BaseRoute]]:
        from bodega.broker.view.registry_catalog import RegistryCatalog
        from bodega.registry import RegistryConfig, open_registry
        from bodega.registry.sealing.keyfile import needed

        config = self.config
        host = config.gossip_host or config.listen_host
        keys = needed(config.gossip_keyring)
        self.node = await open_registry(RegistryConfig(
            name=config.name, role="broker", region=self.nearest, data_dir=config.data_dir,
            keyring=keys.keyring, keyring_file=keys.file,
            bind_host=host, bind_port=config.gossip_port,
            seeds=config.seeds, meta={"url": url, **certificate_meta(self.tls),
                                      **({SIGNER: "yes"} if self.authority else {}),
                                      **({STORE_FLAG: "yes"} if config.metrics_store else {})}),
            config.registry_agent,
            registry=self.metrics.registry,  # gossip counters (bad packets too) in /metrics
            tls=self.tls)
        await self.node.start()
        return RegistryCatalog(self.node), list(self.node.routes())

    async def _follow(self, catalog: Catalog) -> None:
        """Keep the candidate tables and the machine index current as the view changes."""
        while True:
            try:
                async for change in catalog.changes():
                    if change.table == "workers":
                        self.candidates.on_worker(change.key)
                    elif change.table == "machines":
                        doc = self.workers.on_machine(change.key)
                        self.standbys.on_machine(change.key, doc)
                    elif change.table == "jobs":
                        self.jobs.on_job(change.key)
                    elif change.table == "members":
                        self.candidates.on_member(change.key)
                        self.standbys.on_member()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("following the view failed; reloading it")
                self.candidates.load()
                self.workers.load()
                self.standbys.load()
                self.jobs.load()
                await asyncio.sleep(1)

    def _admin(self, request: Request) -> bool:
        try:
            return self.tokens.authenticate(request).admin
        except BodegaError:
            return False

    def _store_peers(self) -> list[str]:
        """Other brokers whose hosts run a metrics store, nearest first."""
        if self.catalog is None:
            return []
        return store_peers(self.catalog.members(), self.config.name, self.nearest)

    async def stop(self) -> None:
        await self.metrics_store.close()
        if self.queries is not None:
            await self.queries.stop()
        if self.dashboard is not None:  # its open streams would hold the server's shutdown
            await self.dashboard.close()
        if self.served is not None:
            await self.served.stop()
        if self.internal is not None:
            await self.internal.stop()
        if self.joins is not None:
            await self.joins.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if hasattr(self, "workers"):
            await self.workers.aclose()
        if self.node is not None:
            await self.node.stop()
