"""The signing broker's join listener: a token lets a host's workers in, and nothing else.

A real broker with a registry node, the test CA's key and a join listener on
loopback. The host's side is played by hand: the CA fetched without checks,
CSRs for worker identities, tokens made and revoked through the admin API.
"""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, hosts_of, identity_of, load_cert, new_key
from tests.keyring_kit import KEYRING, SOURCE
from tests.tls_kit import SECRETS_KEY, TEST_CA

ADMIN = "join-admin"
POOL = "10.77.128.0/17"


def csr(role: str, name: str, host: str = "127.0.0.1") -> str:
    return pki.csr_pem(pki.build_csr(new_key(), Identity(TEST_CA.cluster, role, name),
                                     (host,))).decode()


def unchecked() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def test_a_token_lets_workers_in_and_is_refused_once_revoked_or_guessed(
        tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(
        name="signer", data_dir=tmp_path / "signer", admin_tokens=(ADMIN,), listen_port=0,
        gossip_keyring=SOURCE, secrets_key=SECRETS_KEY, ca_dir=TEST_CA.root / "ca",
        tls_dir=TEST_CA.issue(tmp_path / "signer" / "tls", "broker", "signer"),
        join_host="127.0.0.1", join_port=0, join_subnets=POOL, join_proxy="192.0.2.1:8080"))
    await broker.start()
    try:
        assert broker.joins is not None
        join_url = broker.joins.url
        async with httpx.AsyncClient(base_url=broker.url, timeout=30, headers={
                "authorization": f"Bearer {ADMIN}"}) as admin, httpx.AsyncClient(
                base_url=join_url, verify=unchecked(), timeout=30) as host:
            assert (await host.get("/v1/join/ca")).json()["ca"] == TEST_CA.ca_pem
            nobody = await admin.post("/v1/cluster/join-tokens", json={},
                                      headers={"authorization": "Bearer nope"})
            assert nobody.status_code == 401
            made = await admin.post("/v1/cluster/join-tokens", json={"ttl": 600})
            assert made.status_code == 201, made.text
            token = made.json()["token"]
            joined = await host.post("/v1/join", json={
                "token": token, "region": "syd",
                "workers": [{"name": "syd-t-1", "csr": csr("worker", "syd-t-1")}]})
            assert joined.status_code == 200, joined.text
            answer = joined.json()
            cert = load_cert(answer["workers"][0]["certificate"].encode())
            assert identity_of(cert) == Identity(TEST_CA.cluster, "worker", "syd-t-1")
            assert hosts_of(cert) == ("127.0.0.1",)
            assert ipaddress.IPv4Network(answer["workers"][0]["subnet"]).subnet_of(
                ipaddress.IPv4Network(POOL))
            assert answer["keyring"] == KEYRING.to_json()
            assert answer["secrets_key"] == SECRETS_KEY
            assert answer["seeds"]
            assert answer["proxy"] == "192.0.2.1:8080"  # where its workers relay Flycast
            # Its workers' certificates name the address the host joins from, no other.
            elsewhere = await host.post("/v1/join", json={
                "token": token, "region": "syd",
                "workers": [{"name": "syd-t-5", "csr": csr("worker", "syd-t-5", "10.9.9.9")}]})
            assert elsewhere.status_code == 403, elsewhere.text
            assert "addresses not granted: 10.9.9.9" in elsewhere.json()["error"]
            # A token grants workers only: a broker's certificate is not its to ask for.
            broker_csr = await host.post("/v1/join", json={
                "token": token, "region": "syd",
                "workers": [{"name": "syd-t-2", "csr": csr("broker", "syd-t-2")}]})
            assert broker_csr.status_code == 403, broker_csr.text
            token_id = made.json()["info"]["id"]
            assert (await admin.delete(f"/v1/cluster/join-tokens/{token_id}")).status_code == 200
            revoked = await host.post("/v1/join", json={
                "token": token, "region": "syd",
                "workers": [{"name": "syd-t-3", "csr": csr("worker", "syd-t-3")}]})
            assert revoked.status_code == 403
            assert "was revoked" in revoked.json()["error"]
            listed = {t["id"]: t for t in (await admin.get("/v1/cluster/join-tokens")).json()}
            assert listed[token_id]["status"] == "revoked"
            assert "token" not in listed[token_id]
            guessed = token.rsplit(".", 1)[0] + ".guessed-secret-guessed-secret"
            statuses = []
            for _ in range(25):  # more than a source's budget of failures
                tried = await host.post("/v1/join", json={
                    "token": guessed, "region": "syd",
                    "workers": [{"name": "syd-t-4", "csr": csr("worker", "syd-t-4")}]})
                statuses.append(tried.status_code)
            assert statuses[0] == 403
            assert statuses[-1] == 429
            assert set(statuses) == {403, 429}
    finally:
        await broker.stop()
