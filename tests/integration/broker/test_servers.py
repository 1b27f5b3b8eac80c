"""Two servers (brokers holding the cluster CA's key) share one join book, in the view.

Real brokers with registry nodes gossiping on loopback, each with a join
listener. A token made through one lets a host in through the other; a
revocation through the second is refused by the first; a server join needs a
server token, and gets the CA's key; ``bodega up``'s kept token is checked
against the book through its broker's API. A broker that is no server keeps
tokens too: the book is the view's.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from bodega.broker.config import BrokerConfig
from bodega.broker.daemon import Broker
from bodega.cluster.cluster_keys import JOIN_TOKEN, ensure_join_token
from bodega.cluster.ports import free_udp_ports
from bodega.runtime.tls.core.identity import key_pem
from bodega.wire.transport.json_client import JsonClient
from tests.keyring_kit import SOURCE
from tests.poll_kit import until
from tests.tls_kit import SECRETS_KEY, TEST_CA

from .test_join_listener import csr, unchecked

ADMIN = "servers-admin"
POOL = "10.78.128.0/17"


def server(tmp: Path, name: str, port: int, seeds: tuple[str, ...] = ()) -> Broker:
    """A server as on a host of its own: the CA's files copied into its own directory."""
    ca_dir = tmp / name / "ca"
    shutil.copytree(TEST_CA.root / "ca", ca_dir)
    return Broker(BrokerConfig(
        name=name, data_dir=tmp / name, admin_tokens=(ADMIN,), listen_port=0,
        gossip_port=port, seeds=seeds, gossip_keyring=SOURCE, secrets_key=SECRETS_KEY,
        ca_dir=ca_dir, tls_dir=TEST_CA.issue(tmp / name / "tls", "broker", name),
        join_host="127.0.0.1", join_port=0, join_subnets=POOL))


def plain_broker(tmp: Path, name: str, port: int, seeds: tuple[str, ...]) -> Broker:
    """A broker on a joined host that is not a server: no CA key, no join listener."""
    return Broker(BrokerConfig(
        name=name, data_dir=tmp / name, admin_tokens=(ADMIN,), listen_port=0,
        gossip_port=port, seeds=seeds, gossip_keyring=SOURCE, secrets_key=SECRETS_KEY,
        tls_dir=TEST_CA.issue(tmp / name / "tls", "broker", name)))


@contextlib.asynccontextmanager
async def two_brokers(tmp: Path, second_is: Callable[[Path, str, int, tuple[str, ...]], Broker]
                      = server, name: str = "broker-b") -> AsyncIterator[tuple[Broker, Broker]]:
    """A server, and a second broker (``second_is``: a server, or not) gossiping with it."""
    port_a, port_b = free_udp_ports("127.0.0.1", 2)
    first = server(tmp, "broker-a", port_a)
    await first.start()
    second = second_is(tmp, name, port_b, (f"127.0.0.1:{port_a}",))
    try:
        await second.start()
        yield first, second
    finally:
        await second.stop()
        await first.stop()


def admin(broker: Broker) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=broker.url, timeout=30,
                             headers={"authorization": f"Bearer {ADMIN}"})


def joining(broker: Broker) -> httpx.AsyncClient:
    assert broker.joins is not None
    return httpx.AsyncClient(base_url=broker.joins.url, verify=unchecked(), timeout=30)


def plain_join(token: str, worker: str) -> dict[str, Any]:
    return {"token": token, "region": "syd",
            "workers": [{"name": worker, "csr": csr("worker", worker)}]}


def server_join(token: str, worker: str) -> dict[str, Any]:
    suffix = worker.rsplit("-", 1)[0]
    return {**plain_join(token, worker), "server": True,
            "broker": {"name": f"broker-{suffix}", "csr": csr("broker", f"broker-{suffix}")}}


async def status_of(api: httpx.AsyncClient, token_id: str) -> dict[str, Any] | None:
    listed = {t["id"]: t for t in (await api.get("/v1/cluster/join-tokens")).json()}
    return listed.get(token_id)


async def test_a_token_made_at_one_server_is_taken_at_another_and_revoked_at_either(
        tmp_path: Path) -> None:
    async with two_brokers(tmp_path) as (a, b), admin(a) as api_a, admin(b) as api_b, \
            joining(a) as join_a, joining(b) as join_b:
        made = (await api_a.post("/v1/cluster/join-tokens", json={"ttl": 600})).json()
        token, token_id = made["token"], made["info"]["id"]
        await until(lambda: status_of(api_b, token_id), 30, 0.1, "the token at broker-b")
        joined = await join_b.post("/v1/join", json=plain_join(token, "syd-s-1"))
        assert joined.status_code == 200, joined.text
        held = joined.json()["workers"][0]["subnet"]
        assert joined.json().get("ca_key") is None  # a plain join never gets the CA's key
        # broker-a hears of the join: its count, and the subnet it handed out.
        await until(lambda: _joins(api_a, token_id, 1), 30, 0.1, "the join at broker-a")
        again = await join_a.post("/v1/join", json=plain_join(token, "syd-s-2"))
        assert again.status_code == 200, again.text
        assert again.json()["workers"][0]["subnet"] != held

        assert (await api_b.delete(f"/v1/cluster/join-tokens/{token_id}")).status_code == 200
        await until(lambda: _revoked(api_a, token_id), 30, 0.1, "the revocation at broker-a")
        refused = await join_a.post("/v1/join", json=plain_join(token, "syd-s-3"))
        assert refused.status_code == 403, refused.text
        assert "was revoked" in refused.json()["error"]
        assert (await status_of(api_a, token_id) or {})["joins"] == 2


async def _joins(api: httpx.AsyncClient, token_id: str, count: int) -> bool:
    return ((await status_of(api, token_id)) or {}).get("joins") == count


async def _revoked(api: httpx.AsyncClient, token_id: str) -> bool:
    return ((await status_of(api, token_id)) or {}).get("status") == "revoked"


async def test_a_server_join_takes_a_server_token_and_gets_the_ca_key(tmp_path: Path) -> None:
    async with two_brokers(tmp_path) as (a, b), admin(a) as api_a, admin(b) as api_b, \
            joining(b) as join_b:
        plain = (await api_a.post("/v1/cluster/join-tokens", json={})).json()
        made = await api_a.post("/v1/cluster/join-tokens",
                                json={"server": True, "description": "lon"})
        assert made.status_code == 201, made.text
        assert made.json()["info"]["server"] is True
        assert plain["info"]["server"] is False
        token = made.json()["token"]
        await until(lambda: status_of(api_b, made.json()["info"]["id"]), 30, 0.1,
                    "the server token at broker-b")
        refused = await join_b.post("/v1/join", json=server_join(plain["token"], "lon-s-1"))
        assert refused.status_code == 403, refused.text
        assert "is not a server token" in refused.json()["error"]
        assert "bodega cluster token create --server" in refused.json()["error"]
        no_broker = {**server_join(token, "lon-s-1"), "broker": None}
        assert (await join_b.post("/v1/join", json=no_broker)).status_code == 400
        joined = await join_b.post("/v1/join", json=server_join(token, "lon-s-1"))
        assert joined.status_code == 200, joined.text
        answer = joined.json()
        assert answer["ca_key"] == key_pem(TEST_CA.authority.key).decode()
        assert answer["join_subnets"] == POOL
        assert answer["broker_cert"]["name"] == "broker-lon-s"
        # A server token lets a plain host in too, without the key.
        plain_host = await join_b.post("/v1/join", json=plain_join(token, "lon-s-2"))
        assert plain_host.status_code == 200, plain_host.text
        assert plain_host.json().get("ca_key") is None


async def test_a_broker_that_is_no_server_keeps_the_tokens_a_server_takes(
        tmp_path: Path) -> None:
    async with two_brokers(tmp_path, plain_broker, "broker-c") as (a, c):
        assert c.joins is None
        async with admin(a) as api_a, admin(c) as api_c, joining(a) as join_a:
            made = await api_c.post("/v1/cluster/join-tokens", json={"ttl": 600})
            assert made.status_code == 201, made.text
            token_id = made.json()["info"]["id"]
            await until(lambda: status_of(api_a, token_id), 30, 0.1, "the token at broker-a")
            joined = await join_a.post("/v1/join", json=plain_join(made.json()["token"],
                                                                   "syd-c-1"))
            assert joined.status_code == 200, joined.text
            await until(lambda: _joins(api_c, token_id, 1), 30, 0.1, "the join at broker-c")


async def test_up_keeps_its_join_token_while_the_book_takes_it(tmp_path: Path) -> None:
    async with two_brokers(tmp_path) as (a, b), admin(a) as api_a, admin(b) as api_b, \
            JsonClient(a.url, ADMIN) as api:
        first = await ensure_join_token(tmp_path, TEST_CA.authority, api)
        assert (tmp_path / JOIN_TOKEN).read_text().strip() == first
        assert (tmp_path / JOIN_TOKEN).stat().st_mode & 0o077 == 0
        assert await ensure_join_token(tmp_path, TEST_CA.authority, api) == first
        token_id = first.split("::")[1].split(".")[0]
        await until(lambda: status_of(api_b, token_id), 30, 0.1, "the token at broker-b")
        assert (await api_b.delete(f"/v1/cluster/join-tokens/{token_id}")).status_code == 200
        await until(lambda: _revoked(api_a, token_id), 30, 0.1, "revoked at broker-a")
        second = await ensure_join_token(tmp_path, TEST_CA.authority, api)
        assert second != first
        assert (tmp_path / JOIN_TOKEN).read_text().strip() == second
