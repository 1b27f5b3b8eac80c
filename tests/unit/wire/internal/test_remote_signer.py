"""A renewal through the cluster's signers: a dead or silent one is passed over for the next.

The servers' answers are played by a transport of the test's own (no socket):
one that cannot be reached, one that takes the call and never answers, one
that answers an error, and one that signs with the CA in this process.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from bodega.model.errors import Unavailable
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core import pki
from bodega.runtime.tls.core.identity import Identity, load_cert, new_key
from bodega.runtime.tls.files import CaDir, TlsDir
from bodega.runtime.tls.renewal import Renewal
from bodega.wire.internal.cert_client import CERTIFICATES_PATH, RemoteSigner
from bodega.wire.transport.seam import Answer, Call, NoAnswer, NotConnected, Streamed

WORKER = Identity("c1", "worker", "ams-1")


class Signers:
    """Servers by URL: "dead" refuses connections, "silent" never answers, "busy" answers
    503, "good" signs for the caller's identity."""

    def __init__(self, ca: CertificateAuthority, caller: InternalTls) -> None:
        self.ca = ca
        self.caller = caller
        self.asked: list[str] = []

    async def send(self, call: Call) -> Answer:
        server = call.url.removesuffix(CERTIFICATES_PATH)
        self.asked.append(server)
        if server.endswith("dead"):
            raise NotConnected("connection refused")
        if server.endswith("silent"):
            raise NoAnswer("TimeoutError")
        if server.endswith("busy"):
            return Answer(503, b'{"error": "unavailable: busy", "status": "unavailable"}')
        assert call.body is not None
        assert self.caller.certificate is not None
        issued = self.ca.renew(json.loads(call.body)["csr"].encode(), self.caller.certificate)
        return Answer(200, issued.model_dump_json().encode())

    def stream(self, call: Call) -> AbstractAsyncContextManager[Streamed]:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


def member(tmp: Path) -> tuple[CertificateAuthority, InternalTls]:
    ca = CertificateAuthority.ensure(CaDir(tmp / "ca"), "c1", lifetime=3600.0)
    ca.issue(TlsDir(tmp / "w"), WORKER, ("127.0.0.1",))
    return ca, InternalTls(TlsDir(tmp / "w"))


async def test_a_renewal_falls_over_past_dead_silent_and_failing_signers_to_a_live_one(
        tmp_path: Path) -> None:
    ca, tls = member(tmp_path)
    servers = Signers(ca, tls)
    order = ["https://dead", "https://silent", "https://busy", "https://good"]
    signer = RemoteSigner(tls, lambda: order, transport=servers)
    old = tls.certificate
    renewal = Renewal(tls, signer)
    await renewal.renew()
    assert servers.asked == order
    assert renewal.renewed == 1
    assert tls.certificate is not None
    assert tls.certificate != old
    assert pki.verify(tls.certificate, ca.cert, ca.clock()) == WORKER
    # The live one first: it alone is asked.
    servers.asked.clear()
    csr = pki.csr_pem(pki.build_csr(new_key(), WORKER, ("127.0.0.1",)))
    issued = await RemoteSigner(tls, lambda: ["https://good", "https://dead"],
                                transport=servers).sign(csr)
    assert servers.asked == ["https://good"]
    assert load_cert(issued.certificate.encode()).issuer == ca.cert.subject


async def test_with_no_signer_answering_the_renewal_says_what_each_did(tmp_path: Path) -> None:
    ca, tls = member(tmp_path)
    servers = Signers(ca, tls)
    signer = RemoteSigner(tls, lambda: ["https://dead", "https://silent"], transport=servers)
    with pytest.raises(Unavailable, match=r"no signer signed: https://dead: .*connection refused"
                                          r".*; https://silent: .*did not answer"):
        await signer.sign(b"csr")
    with pytest.raises(Unavailable, match="no certificate signer in the cluster view"):
        await RemoteSigner(tls, lambda: [], transport=servers).sign(b"csr")
