"""The signing broker's internal route: a member renews its own identity, and only that."""

from __future__ import annotations

from pathlib import Path

import httpx

from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, identity_of, load_cert, new_key
from tests.tls_kit import TEST_CA

from .broker_kit import in_process_cluster


def csr(role: str, name: str, hosts: tuple[str, ...] = ()) -> str:
    request = pki.build_csr(new_key(), Identity(TEST_CA.cluster, role, name), hosts)
    return pki.csr_pem(request).decode()


async def test_a_member_gets_a_certificate_for_its_own_identity_and_nothing_else(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        broker = await c.add_broker(ca_dir=TEST_CA.root / "ca")
        url = broker.internal_url
        async with TEST_CA.http("worker", name="w9", base_url=url) as member:
            mine = await member.post("/v1/cluster/certificates", json={"csr": csr("worker", "w9")})
            assert mine.status_code == 200, mine.text
            issued = load_cert(mine.json()["certificate"].encode())
            assert identity_of(issued) == Identity(TEST_CA.cluster, "worker", "w9")
            assert mine.json()["ca"] == TEST_CA.ca_pem
            for other, why in ((csr("worker", "w8"), "granted w9 only"),
                               (csr("broker", "w9"), "a broker certificate is not granted"),
                               (csr("worker", "w9", ("10.9.9.9",)), "not granted: 10.9.9.9")):
                refused = await member.post("/v1/cluster/certificates", json={"csr": other})
                assert refused.status_code == 403, refused.text
                assert refused.json()["status"] == "permission_denied"
                assert why in refused.json()["error"]
            garbage = await member.post("/v1/cluster/certificates", json={"csr": "garbage"})
            assert garbage.status_code == 400
            extra = await member.post("/v1/cluster/certificates", json={"csr": "x", "role": "b"})
            assert extra.status_code == 400  # the body has one field
        async with httpx.AsyncClient(base_url=url, verify=TEST_CA.anonymous()) as nobody:
            try:
                await nobody.post("/v1/cluster/certificates", json={"csr": csr("worker", "w9")})
            except httpx.TransportError:
                pass  # refused in the handshake: no certificate, no certificate
            else:
                raise AssertionError("a caller without a certificate got an answer")
