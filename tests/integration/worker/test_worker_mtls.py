"""Mutual TLS between real daemons: who gets through the handshake, who gets 403, and a
renewal that swaps certificates under load with no restart and no failed request.

Real ``bodega worker`` and ``bodega broker`` processes on loopback; every knock is a real
TLS handshake, and every refusal is counted in the daemon's own metrics.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import ssl
from functools import partial
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.contexts import client_context
from bodega.runtime.tls.core.identity import Identity, cert_pem
from bodega.runtime.tls.files import TlsDir
from tests.integration.daemon_kit import (
    BROKER_TOKEN,
    Daemon,
    broker_daemon,
    running_worker_daemon,
    worker_daemon,
)
from tests.poll_kit import until as poll_until
from tests.tls_kit import TEST_CA, ClusterCa

CONFIG = {"image": "app:1", "guest": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256}}
MACHINE = {"app": "web", "config": CONFIG}


def refusals(metrics: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^bodega_internal_refused_total\{reason="([^"]+)"\} (\S+)$', metrics, re.MULTILINE)}


async def knock(url: str, context: ssl.SSLContext | bool) -> str:
    """What a call with ``context`` came to: the status, or how the connection failed."""
    try:
        async with httpx.AsyncClient(verify=context, timeout=10) as http:
            return str((await http.post(url + "/v1/machines", json=MACHINE)).status_code)
    except httpx.TransportError as exc:
        return f"refused ({exc.__class__.__name__})"


async def test_strangers_are_refused_in_the_handshake_and_wrong_roles_with_403(
        tmp_path: Path) -> None:
    async with running_worker_daemon(tmp_path) as (daemon, client):
        url = daemon.url
        knocks = {"no certificate": await knock(url, TEST_CA.anonymous()),
                  "another CA's": await knock(url, TEST_CA.stranger()),
                  "an expired one": await knock(url, TEST_CA.expired())}
        assert all(v.startswith("refused") for v in knocks.values()), knocks
        with pytest.raises(httpx.TransportError):  # plain HTTP on a TLS port
            await httpx.AsyncClient().post(url.replace("https:", "http:") + "/v1/machines")
        machine = await client.create_machine(MACHINE)  # a broker may
        mid = machine.id
        # A worker may call no machine route of another worker; a proxy wakes, never creates.
        async with TEST_CA.http("worker", base_url=url) as worker, \
                TEST_CA.http("proxy", base_url=url) as proxy:
            answers = [await worker.post("/v1/machines", json=MACHINE),
                       await worker.get(f"/v1/machines/{mid}"),
                       await worker.post(f"/v1/machines/{mid}/stop", json={}),
                       await proxy.post("/v1/machines", json=MACHINE),
                       await proxy.delete(f"/v1/machines/{mid}")]
            for answer in answers:
                assert answer.status_code == 403, answer.text
                assert answer.json()["status"] == "permission_denied"
            assert "a worker may not call POST /v1/machines" in answers[0].json()["error"]
            await client.wait(mid, "started", timeout=10)
            stopped = await proxy.post(f"/v1/machines/{mid}/stop", json={})
            assert stopped.status_code == 200, stopped.text  # what a proxy may do
            assert (await worker.get("/v1/health")).status_code == 200
        assert len(await client.list_machines()) == 1  # the refused creates made nothing
        async with TEST_CA.http("admin") as admin:
            counted = refusals((await admin.get(url + "/metrics")).text)
        assert counted == {"no certificate": 1, "unknown authority": 1, "expired": 1,
                           "not tls": 1, "role": 5}


async def test_a_broker_places_over_mutual_tls_and_its_internal_listener_is_for_members(
        tmp_path: Path) -> None:
    worker = await worker_daemon(tmp_path, "w1").start()
    broker = broker_daemon(tmp_path, "b1", "--join", gossip_of(worker))
    try:
        await broker.start()
        async with httpx.AsyncClient(base_url=broker.url, timeout=30, headers={
                "authorization": f"Bearer {BROKER_TOKEN}"}) as api:
            await until_true(lambda: ready(api))
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})
            created = await api.post("/v1/apps/web/machines", json={"config": CONFIG})
            assert created.status_code == 200, created.text
            sync = await api.post("/v1/registry/sync", json={})
            assert sync.status_code == 404  # nothing of the members' on the public port
        internal = broker.internal_url
        assert internal.startswith("https://")
        assert (await knock(internal, TEST_CA.anonymous())).startswith("refused")
        async with TEST_CA.http("admin", base_url=internal) as admin, \
                TEST_CA.http("worker", base_url=internal) as member:
            assert (await admin.post("/v1/registry/sync", json={})).status_code == 403
            assert (await member.post("/v1/registry/sync", json={})).status_code == 400
            # This broker holds no CA key: it signs nothing.
            signed = await member.post("/v1/cluster/certificates", json={"csr": "x"})
            assert signed.status_code == 404, signed.text
    finally:
        await broker.stop()
        await worker.stop()


async def ready(api: httpx.AsyncClient) -> bool:
    """The broker has heard from the cluster (creates get honest answers) and sees a worker."""
    health = await api.get("/v1/health")
    return health.status_code == 200 and await workers_alive(api, 1)


async def workers_alive(api: httpx.AsyncClient, count: int) -> bool:
    found = (await api.get("/v1/cluster/workers")).json()
    return len([w for w in found if w.get("status") == "alive"]) >= count


until_true = partial(poll_until, timeout=60.0, every=0.1)


async def served_serial(url: str, context: ssl.SSLContext) -> int:
    """The serial of the certificate the listener at ``url`` presents in a new handshake."""
    host, port = url.removeprefix("https://").rsplit(":", 1)
    _reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return int(x509.load_der_x509_certificate(der).serial_number)


async def test_certificates_are_renewed_under_load_with_no_restart_and_no_failed_request(
        tmp_path: Path) -> None:
    lifetime = 20.0  # renewed at two thirds: every ~13 s
    ca = ClusterCa.make(tmp_path / "pki", "renew", lifetime=lifetime)
    lasting = CertificateAuthority(ca.authority.cert, ca.authority.key, lifetime=3600.0)
    for directory, role, name in ((tmp_path / "w1" / "tls", "worker", "w1"),
                                  (tmp_path / "b1" / "tls", "broker", "b1")):
        ca.authority.issue(TlsDir(directory), Identity("renew", role, name), ("127.0.0.1",))
    lasting.issue(TlsDir(tmp_path / "me"), Identity("renew", "admin", "test"), ())
    mine = client_context(cert_pem(ca.authority.cert).decode())
    mine.load_cert_chain(TlsDir(tmp_path / "me").identity_path)

    worker = worker_daemon(tmp_path, "w1")
    worker.identity = None  # it has its own, from this CA
    await worker.start()
    broker = broker_daemon(tmp_path, "b1", "--join", gossip_of(worker),
                           "--ca-dir", str(tmp_path / "pki" / "ca"),
                           "--cert-validity", f"{lifetime:g}s")
    broker.identity = None
    failures: list[str] = []
    done = 0
    try:
        await broker.start()
        daemons = {"w1": worker, "b1": broker}
        pids = {name: d.pid for name, d in daemons.items()}
        first = {name: await served_serial(d.internal_url, mine) for name, d in daemons.items()}
        async with httpx.AsyncClient(base_url=broker.url, timeout=30, headers={
                "authorization": f"Bearer {BROKER_TOKEN}"}) as api:
            await until_true(lambda: ready(api))
            published = await expiries(api)
            await api.post("/v1/apps", json={"app_name": "web", "org_slug": "personal"})

            async def load() -> None:  # a steady create/destroy through the public API
                nonlocal done
                while True:
                    created = await api.post("/v1/apps/web/machines", json={"config": CONFIG})
                    if created.status_code != 200:
                        failures.append(f"create: {created.status_code} {created.text}")
                        continue
                    mid = created.json()["id"]
                    gone = await api.delete(f"/v1/apps/web/machines/{mid}",
                                            params={"force": "true"})
                    if gone.status_code != 200:
                        failures.append(f"destroy: {gone.status_code} {gone.text}")
                    done += 1

            running = asyncio.create_task(load())

            async def renewed() -> bool:
                now = {n: await served_serial(d.internal_url, mine) for n, d in daemons.items()}
                later = await expiries(api)
                return all(now[n] != first[n] and later[n] > published[n] for n in daemons)

            await until_true(renewed, timeout=3 * lifetime)
            # And on, past the end of the first certificates (notAfter is to the second).
            last = max(published.values()) + datetime.timedelta(seconds=3)
            await asyncio.sleep(max(0.0, (last - datetime.datetime.now(datetime.UTC))
                                    .total_seconds()))
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
        assert {name: d.pid for name, d in daemons.items()} == pids  # nobody restarted
        assert all(d.process is not None and d.process.returncode is None
                   for d in daemons.values())
        assert failures == []
        assert done > 10
    finally:
        await broker.stop()
        await worker.stop()


def gossip_of(daemon: Daemon) -> str:
    return str(json.loads(daemon.ready_file.read_text())["gossip"])


async def expiries(api: httpx.AsyncClient) -> dict[str, datetime.datetime]:
    """When each member's certificate expires, as it publishes."""
    members = (await api.get("/v1/cluster/members")).json()
    return {m["name"]: datetime.datetime.fromisoformat(m["meta"]["cert_expires"])
            for m in members}
