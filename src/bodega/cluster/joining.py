"""A host joining a cluster: check the CA against the token's pin, send CSRs, keep the answer.

``join`` is what ``bodega join ADDR --token T`` does the first time on a data
dir, in this order:

1. fetch the cluster CA from the join listener at ``ADDR`` (TLS, not yet
   checked: there is nothing to check it against) and compare its SHA-256
   with the pin in the token; a different CA ends the join there, before the
   token or anything else is sent;
2. make the private key of each worker, of the host's registry agent and
   (unless told not to) of its broker and proxy, each in its own TLS
   directory, and send only a CSR for each, with the token, over TLS checked
   against the pinned CA;
3. write what came back: each certificate beside its key, the CA, the
   gossip keyring (``gossip-keyring``), the secrets key (``secrets-key``);
   for a broker the admin token (``api-token``), for a broker or a proxy the
   certificates key (``certs-key``), for a proxy the edge's default
   certificate, for a server the CA's key (``tls/ca-key.pem``); and
   ``joined.json`` (``joined.py``), which is all a restart needs: the host
   comes back with the same names, keys and certificates, no token.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import ssl
from pathlib import Path

import aiohttp
from cryptography import x509
from pydantic import ValidationError

from bodega.cluster.edge_files import CA_CRT, CERTS_KEY, DEFAULT_CERT
from bodega.cluster.joined import HostRoles, JoinedHost, JoinedWorker, member_tls, worker_tls
from bodega.model.errors import from_wire
from bodega.registry.sealing import keyfile
from bodega.registry.sealing.core.keyring import Keyring
from bodega.runtime.tls.contexts import client_context
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import (
    Identity,
    cert_pem,
    load_cert,
    load_key,
    new_key,
    trust_domain,
)
from bodega.runtime.tls.core.join_token import JoinToken, ca_hash
from bodega.runtime.tls.files import CaDir, TlsDir, write_private
from bodega.wire.internal.join import (
    CA_PATH,
    JOIN_PATH,
    CaAnswer,
    JoinAnswer,
    JoiningWorker,
    JoinRequest,
)
from bodega.wire.transport.aiohttp_transport import why_unconnected

TIMEOUT = aiohttp.ClientTimeout(total=30, connect=5)


class JoinFailed(ValueError):
    """The join did not happen; the message says why and what to do."""


def unchecked_context() -> ssl.SSLContext:
    """TLS that checks nothing, for fetching the CA the pin is then checked against."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def fetch_ca(base: str) -> x509.Certificate:
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.get(
                base + CA_PATH, ssl=unchecked_context()) as answer:
            text = await answer.text()
            if answer.status != 200:
                raise JoinFailed(f"{base} is not a bodega join listener (HTTP {answer.status})")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise JoinFailed(f"cannot reach the join listener at {base}: {_why(exc)} (is `bodega "
                         "up --advertise` running there, and is its join port open?)") from None
    try:
        return load_cert(CaAnswer.model_validate_json(text).ca.encode())
    except (ValidationError, ValueError):
        raise JoinFailed(f"{base} answered what is not a cluster CA") from None


def _why(exc: BaseException) -> str:
    """A few words on a failed exchange, never the library's repr (which names its TLS
    context object)."""
    if isinstance(exc, aiohttp.ClientConnectionError | TimeoutError):
        return why_unconnected(exc)
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or exc.__class__.__name__


def check_pin(ca: x509.Certificate, token: JoinToken, base: str) -> None:
    found = ca_hash(ca)
    if not hmac.compare_digest(found, token.ca_hash):
        raise JoinFailed(f"the cluster at {base} presents CA sha256:{found[:16]}..., not the "
                         f"one the token pins (sha256:{token.ca_hash[:16]}...): nothing was "
                         "sent; check the address and the token")


async def post_join(base: str, ca: x509.Certificate, request: JoinRequest) -> JoinAnswer:
    context = client_context(cert_pem(ca).decode())
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as http, http.post(
                base + JOIN_PATH, json=request.model_dump(), ssl=context) as answer:
            text = await answer.text()
            status = answer.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise JoinFailed(f"the join at {base} failed: {_why(exc)}") from None
    if status != 200:
        try:
            message = from_wire(status, json.loads(text)).message
        except ValueError:
            message = f"HTTP {status}"
        if "addresses not granted" in message:
            message += " (a host's workers serve on the address it joins from: give that one " \
                       "to --advertise)"
        raise JoinFailed(f"{base} refused the join: {message}")
    return JoinAnswer.model_validate_json(text)


async def join(data_dir: Path, address: str, port: int, token_text: str, region: str,
               workers: int, advertise: str, roles: HostRoles | None = None) -> JoinedHost:
    """``roles``: what the host runs besides its workers (default: a broker and a proxy)."""
    roles = roles or HostRoles()
    try:
        token = JoinToken.parse(token_text)
    except ValueError as exc:
        raise JoinFailed(str(exc)) from None
    base = f"https://{address}:{port}"
    ca = await fetch_ca(base)
    check_pin(ca, token, base)  # before anything of ours is sent
    host_id = secrets.token_hex(3)  # worker names are unique across the cluster's hosts
    names = [f"{region}-{host_id}-{i}" for i in range(1, workers + 1)]
    keys = {}
    asked = []
    cluster = trust_domain(ca)
    for name in names:
        key = new_key()  # made here, kept here: only the CSR leaves
        keys[name] = key
        csr = pki.build_csr(key, Identity(cluster, "worker", name), [advertise])
        asked.append(JoiningWorker(name=name, csr=pki.csr_pem(csr).decode()))
    # The host's own members beside its workers: its registry agent, broker and proxy.
    wanted = {"agent": True, "broker": roles.broker, "proxy": roles.proxy}
    own = {role: (f"{role}-{region}-{host_id}", new_key()) for role, on in wanted.items() if on}

    def asking(role: str) -> JoiningWorker | None:
        if role not in own:
            return None
        name, key = own[role]
        made = pki.build_csr(key, Identity(cluster, role, name), [advertise])
        return JoiningWorker(name=name, csr=pki.csr_pem(made).decode())

    answer = await post_join(base, ca, JoinRequest(
        token=token_text.strip(), region=region, workers=asked, agent=asking("agent"),
        broker=asking("broker"), proxy=asking("proxy"), server=roles.server))
    if roles.server and not answer.ca_key:
        raise JoinFailed(f"{base} let the host in but sent no CA key: it signs no servers "
                         "(an older bodega?); join without --server")
    for role, issued in (("agent", answer.agent), ("broker", answer.broker_cert),
                         ("proxy", answer.proxy_cert)):
        if issued is not None and role in own:  # a broker that knows of the role signed it
            where = TlsDir(member_tls(data_dir, role))
            where.write_ca(ca)
            where.write_identity(own[role][1], load_cert(issued.certificate.encode()))
    for issued in answer.workers:
        where = TlsDir(worker_tls(data_dir, issued.name))
        where.write_ca(ca)
        where.write_identity(keys[issued.name], load_cert(issued.certificate.encode()))
    keyfile.write(data_dir / keyfile.FILE_NAME, Keyring.from_json(answer.keyring))
    write_private(data_dir / "secrets-key", (answer.secrets_key + "\n").encode())
    _write_trust(data_dir, ca, answer)
    host = JoinedHost(cluster_id=answer.cluster_id, ca_sha256=ca_hash(ca), region=region,
                      advertise=advertise, join=f"{address}:{port}", api_url=answer.api_url,
                      seeds=answer.seeds, image_registry=answer.image_registry, proxy=answer.proxy,
                      private_network=answer.private_network,
                      agent=answer.agent.name if answer.agent else None,
                      registry_agent=answer.registry_agent and answer.agent is not None,
                      broker=answer.broker_cert.name if answer.broker_cert else None,
                      proxy_name=answer.proxy_cert.name if answer.proxy_cert else None,
                      server=bool(answer.ca_key), join_subnets=answer.join_subnets,
                      edge_domain=answer.edge_domain, api_port=roles.api_port,
                      proxy_port=roles.proxy_port, proxy_tls_port=roles.proxy_tls_port,
                      join_port=roles.join_port,
                      workers=[JoinedWorker(name=w.name, subnet=w.subnet)
                               for w in answer.workers])
    host.write(data_dir)
    return host


def _write_trust(data_dir: Path, ca: x509.Certificate, answer: JoinAnswer) -> None:
    """What the host's broker and proxy hold, as ``bodega up`` keeps its own (0600 each)."""
    if answer.admin_token:
        write_private(data_dir / "api-token", (answer.admin_token + "\n").encode())
    if answer.certs_key:
        write_private(data_dir / CERTS_KEY, (answer.certs_key + "\n").encode())
    if answer.edge_cert:
        write_private(data_dir / DEFAULT_CERT, answer.edge_cert.encode())
    write_private(data_dir / CA_CRT, cert_pem(ca), 0o644)
    if answer.ca_key:
        CaDir(data_dir / "tls").write(ca, load_key(answer.ca_key.encode()))
