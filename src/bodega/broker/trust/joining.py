"""Hosts joining the cluster: the join listener, and join tokens on the Machines API.

Only a server, a broker holding the cluster CA's key (``--ca-dir``), lets hosts
in; every server reads and writes the same join book, in the cluster view
(``join_book.py``), so a token made through one is taken by any. Its
join listener (``--join-listen``) is TLS with the broker's own certificate
and asks for no client certificate: a joining host has none yet, and checks
this listener against the CA its token pins. It serves two routes:

- ``GET /v1/join/ca``: the CA certificate, for the host to hash and compare
  with the pin before it sends anything;
- ``POST /v1/join``: a token and one CSR per worker, and one each for the
  host's broker, proxy and registry agent. The token is checked
  (``join_token.admit``: this cluster's, known, not revoked, not expired);
  each CSR is signed for exactly its role and name (``worker/<name>``,
  ``broker/broker-...``, ``proxy/proxy-...``, ``agent/agent-...``) and the
  address the host joins from, no other (so a host cannot get a certificate
  for another member's address); each worker gets a machine subnet. The
  answer carries what a member needs: the gossip keyring, the secrets key,
  where to gossip; to a host that runs a broker (it serves the Machines API)
  the admin token and the certificates key; to one that runs a proxy the
  certificates key and the edge's default certificate. A host joining as a
  server (``server: true``: ``bodega join --server``) needs a server token
  and a broker, and gets besides the CA's key and the range joined workers'
  subnets come from: it then lets hosts in and signs renewals itself. A
  refused token is 403 with the reason, and failures are rate-limited per
  source as logins are.

On the public listener of any broker (the book is the view's), admin tokens
only: ``POST /v1/cluster/join-tokens``
(``{"ttl": seconds, "description", "server"}``; the token is shown once), ``GET`` (the
tokens, never their secrets) and ``DELETE .../{id}`` (revoked at once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.core.limit import FailureLimiter
from bodega.broker.auth.tokens import Principal
from bodega.broker.trust.join_book import JoinStore
from bodega.model.errors import BadRequest, Forbidden, NotFound, TooManyRequests
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core import pki, sites
from bodega.runtime.tls.core.identity import Identity, Refused, cert_pem, key_pem
from bodega.runtime.tls.core.join_token import JoinRefused, JoinToken, TokenRecord
from bodega.wire.internal.join import (
    CA_PATH,
    JOIN_PATH,
    TOKENS_PATH,
    CaAnswer,
    JoinAnswer,
    JoinedWorker,
    JoiningWorker,
    JoinRequest,
    TokenCreate,
    TokenCreated,
    TokenInfo,
)
from bodega.wire.transport.http import (
    RouteMaker,
    handle_errors,
    json_response,
    not_found_app_handler,
    read_model,
)

log = logging.getLogger("bodega.broker")


@dataclass
class Joining:
    """What a join needs from the broker: its CA, its book, and the cluster's state now."""

    authority: CertificateAuthority
    store: JoinStore
    subnet_pool: str | None  # joined workers' machine subnets come from here
    keyring: Callable[[], str]  # the gossip keyring's JSON, as the registry holds it now
    seeds: Callable[[], list[str]]  # gossip host:port of live members
    taken_subnets: Callable[[], list[str]]  # machine subnets the view shows in use
    secrets_key: str
    api_url: str
    image_registry: str | None = None
    flycast: str | None = None  # the proxy's public host:port (Flycast relays to it)
    # Whether the cluster's workers run the private network (their rows say it now).
    private_network: Callable[[], bool] = lambda: False
    registry_agent: bool = False  # this broker's host runs a registry agent
    admin_token: str = ""  # the cluster's admin token, to hosts that run a broker
    certs_key: str = ""  # seals the edge's certificate keys ("" for none)
    edge_domain: str = "localhost"

    def join(self, body: JoinRequest, source: str) -> JoinAnswer:
        """Let in the host at ``source``: its workers' certificates name that address only,
        so a host cannot get one for another member's address."""
        token = JoinToken.parse(body.token)
        if body.server and body.broker is None:
            raise ValueError("a host joins as a server with its broker: ask for the broker's "
                             "certificate too")
        admission = self.store.decide(token, [w.name for w in body.workers],
                                      self.subnet_pool, self.taken_subnets(), body.server)
        subnets = admission.subnets
        cluster = self.authority.cluster
        joined = []
        for worker in body.workers:
            grant = pki.Grant.exactly(Identity(cluster, "worker", worker.name), [source])
            issued = self.authority.sign(worker.csr.encode(), grant)
            joined.append(JoinedWorker(name=worker.name, certificate=issued.certificate,
                                       not_after=issued.not_after,
                                       subnet=subnets.get(worker.name)))
        agent, broker, proxy = (self._sign(role, asked, source) for role, asked in (
            ("agent", body.agent), ("broker", body.broker), ("proxy", body.proxy)))
        edge = None
        if proxy is not None and self.certs_key:
            made = sites.issue(self.authority.cert, self.authority.key,
                               (f"*.{self.edge_domain}", self.edge_domain),
                               self.authority.clock())
            edge = (made.key_pem + made.chain_pem).decode()
        self.store.record(admission)  # signed: the join counts, its subnets are held
        log.info("%s joined from %s with token %s: workers %s in %s%s%s",
                 "server" if body.server else "host", source, token.id,
                 ", ".join(w.name for w in body.workers), body.region,
                 "".join(f", {c.name}" for c in (broker, proxy) if c is not None),
                 "; it holds the cluster CA's key from now on" if body.server else "")
        return JoinAnswer(cluster_id=cluster, ca=cert_pem(self.authority.cert).decode(),
                          workers=joined, keyring=self.keyring(),
                          secrets_key=self.secrets_key, seeds=self.seeds(),
                          api_url=self.api_url, image_registry=self.image_registry,
                          proxy=self.flycast, private_network=self.private_network(),
                          agent=agent, registry_agent=self.registry_agent,
                          broker_cert=broker, proxy_cert=proxy,
                          admin_token=(self.admin_token or None) if broker else None,
                          certs_key=(self.certs_key or None) if broker or proxy else None,
                          edge_cert=edge, edge_domain=self.edge_domain,
                          ca_key=key_pem(self.authority.key).decode() if body.server else None,
                          join_subnets=self.subnet_pool if body.server else None)

    def _sign(self, role: str, asked: JoiningWorker | None, source: str
              ) -> JoinedWorker | None:
        """The certificate of the host's ``role`` (named ``<role>-...``), if it asked."""
        if asked is None:
            return None
        if not asked.name.startswith(f"{role}-"):
            raise ValueError(f"a host's {role} is named {role}-...")
        grant = pki.Grant.exactly(Identity(self.authority.cluster, role, asked.name), [source])
        issued = self.authority.sign(asked.csr.encode(), grant)
        return JoinedWorker(name=asked.name, certificate=issued.certificate,
                            not_after=issued.not_after)


def join_app(joining: Joining, limit: FailureLimiter | None = None) -> Starlette:
    limiter = limit or FailureLimiter()

    async def ca(request: Request) -> Response:
        return json_response(CaAnswer(ca=cert_pem(joining.authority.cert).decode()).model_dump())

    async def join(request: Request) -> Response:
        source = request.client.host if request.client else "?"
        wait = limiter.retry_after(source, time.monotonic())
        if wait is not None:
            raise TooManyRequests(f"rate_limited: too many refused joins from {source}",
                                  retry_after=wait)
        body = await read_model(request, JoinRequest)
        try:
            answer = joining.join(body, source)
        except JoinRefused as exc:
            limiter.failed(source, time.monotonic())
            log.warning("refused a join from %s: %s", source, exc)
            raise Forbidden(f"permission_denied: {exc}") from None
        except Refused as exc:  # a bad CSR is the caller's mistake; another role, not its right
            raise (BadRequest if exc.reason == "malformed" else Forbidden)(
                f"certificate request refused: {exc}") from None
        except ValueError as exc:  # a malformed token, or no subnet left
            limiter.failed(source, time.monotonic())
            raise BadRequest(f"invalid_argument: {exc}") from None
        return json_response(answer.model_dump(mode="json"))

    async def ca_route(request: Request) -> Response:
        return await handle_errors(request, ca)

    async def join_route(request: Request) -> Response:
        return await handle_errors(request, join)

    return Starlette(routes=[Route(CA_PATH, ca_route, methods=["GET"]),
                             Route(JOIN_PATH, join_route, methods=["POST"])],
                     exception_handlers={404: not_found_app_handler,
                                         405: not_found_app_handler})


def info(record: TokenRecord, store: JoinStore) -> TokenInfo:
    return TokenInfo(id=record.id, status=record.status(store.clock()), created=record.created,
                     expires=record.expires, revoked=record.revoked,
                     description=record.description, joins=record.joins,
                     server=record.server)


def join_token_routes(r: RouteMaker, store: JoinStore | None) -> list[Route]:
    def book() -> JoinStore:
        if store is None:
            raise NotFound("not found: this broker keeps no join tokens (its cluster has no "
                           "CA: --internal-tls off)")
        return store

    async def create(request: Request, who: Principal) -> Response:
        who.check_admin("join tokens")
        body = await read_model(request, TokenCreate, required=False)
        token, record = book().create(body.ttl, body.description, body.server)
        created = TokenCreated(token=str(token), info=info(record, book()))
        return json_response(created.model_dump(mode="json"), status=201)

    async def listing(request: Request, who: Principal) -> Response:
        who.check_admin("join tokens")
        records = sorted(book().read().tokens.values(), key=lambda t: t.created)
        found: list[Any] = [info(t, book()).model_dump(mode="json") for t in records]
        return json_response(found)

    async def revoke(request: Request, who: Principal) -> Response:
        who.check_admin("join tokens")
        token_id = request.path_params["id"]
        record = book().revoke(token_id)
        if record is None:
            raise NotFound(f"not_found: no join token {token_id}")
        return json_response(info(record, book()).model_dump(mode="json"))

    return [r(TOKENS_PATH, create, "POST", gated=False),
            r(TOKENS_PATH, listing, "GET", gated=False),
            r(TOKENS_PATH + "/{id}", revoke, "DELETE", gated=False)]
