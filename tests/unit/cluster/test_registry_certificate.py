"""The image registry keeps its certificate current whatever a try meets: a certificate it
cannot read once, or a CA it cannot read once, is logged and tried again, and the renewal
then happens and is served. The clock and the waits are the test's: a wait moves the clock
on by what it was asked, at once."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509

from bodega.cluster.image_registry import RegistryCertificate, RegistryTls, front_context
from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core.identity import cert_pem
from bodega.runtime.tls.files import CaDir, TlsDir

LIFETIME = 3600.0
HOSTS = ("127.0.0.1", "localhost")


class Clock:
    """A clock that moves only when a wait asks it to; every wait is recorded."""

    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC)
        self.waits: list[float] = []
        self.before_wait: list[Callable[[], None]] = []  # each called before a wait
        self.hold_after: int | None = None  # waits past this many never end


    def __call__(self) -> datetime.datetime:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.hold_after is not None and len(self.waits) > self.hold_after:
            await asyncio.Event().wait()  # no renewal after the one the test looks at
        if self.before_wait:
            self.before_wait.pop(0)()
        self.now += datetime.timedelta(seconds=seconds)
        await asyncio.sleep(0)


def served_certificate(context: ssl.SSLContext) -> x509.Certificate:
    """The certificate a handshake with the server ``context`` presents now (in memory)."""
    client_side = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_side.check_hostname = False
    client_side.verify_mode = ssl.CERT_NONE  # the test's clock is not the one ssl checks by
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_side.wrap_bio(to_client, to_server, server_hostname="x")
    from_client, from_server = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = context.wrap_bio(from_client, from_server, server_side=True)
    for _ in range(10):
        for end in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        from_client.write(to_server.read())
        to_client.write(from_server.read())
    der = client.getpeercert(binary_form=True)
    assert der is not None, "no handshake"
    return x509.load_der_x509_certificate(der)


def keeper(tmp: Path, clock: Clock) -> tuple[RegistryCertificate, ssl.SSLContext]:
    ca = CertificateAuthority.ensure(CaDir(tmp / "ca"), "c1", lifetime=LIFETIME, clock=clock)
    certificate = RegistryCertificate(RegistryTls(tmp / "ca", LIFETIME, ()), TlsDir(tmp / "tls"),
                                      HOSTS, clock=clock)
    certificate.ensure()
    return certificate, front_context(cert_pem(ca.cert).decode(),
                                      certificate.dir.identity_path)


async def renewed(certificate: RegistryCertificate, context: ssl.SSLContext,
                  clock: Clock) -> x509.Certificate:
    """Keep the certificate until a new one is served; that one."""
    first = served_certificate(context)
    keep = asyncio.create_task(certificate.keep(context, sleep=clock.sleep))
    try:
        for _ in range(3000):
            await asyncio.sleep(0.01)  # the issue runs in a thread
            assert not keep.done(), keep.exception()
            served = served_certificate(context)
            if served.serial_number != first.serial_number:
                return served
        raise AssertionError(f"no renewal after waits of {clock.waits}")
    finally:
        keep.cancel()


async def test_a_certificate_unreadable_once_is_renewed_later(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    certificate, context = keeper(tmp_path, clock)
    identity = certificate.dir.identity_path
    good = identity.read_bytes()
    identity.write_bytes(b"not a key\n")  # a torn write, a disk error: readable again later

    def mended() -> None:
        identity.write_bytes(good)

    clock.before_wait.append(mended)
    clock.hold_after = 2  # the retry, then the renewal: a later one would replace the file
    served = await renewed(certificate, context, clock)
    assert clock.waits[0] == 1.0  # the first retry, then two thirds of the life
    assert clock.waits[1] == pytest.approx(LIFETIME * 2 / 3, abs=LIFETIME / 10 + 1)
    assert served.serial_number == certificate.dir.read_identity()[1].serial_number
    assert "could not read the image registry's certificate (try 1)" in caplog.text


async def test_a_ca_unreadable_at_renewal_is_tried_again_sooner(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    certificate, context = keeper(tmp_path, clock)
    key = CaDir(tmp_path / "ca").key_path
    hidden = key.with_name("hidden")

    def hide() -> None:
        key.rename(hidden)

    def restore() -> None:
        hidden.rename(key)

    clock.before_wait += [hide, restore]
    await renewed(certificate, context, clock)
    assert clock.waits[1] == 1.0  # after the failed try: soon, not at the next two thirds
    assert "could not renew the image registry's certificate (try 1" in caplog.text
