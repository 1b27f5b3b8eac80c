"""A member's certificate in the cluster: its expiry published, its renewal through a signer.

Every member publishes when its certificate expires (``cert_expires`` in its
member metadata, so ``bodega cluster members`` shows it) and renews it at two
thirds of its life (``bodega.runtime.tls.renewal``) without a restart. The
signer is the CA itself when this process holds the CA's key (a server's
broker, started with ``--ca-dir``, which then says ``signer`` in its
metadata), else any live broker that says ``signer``, found in the
membership, asked over mutual TLS with the certificate this member still
holds: one that does not answer is passed over for the next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.renewal import Renewal, Signer
from bodega.wire.internal.cert_client import RemoteSigner

if TYPE_CHECKING:
    from bodega.registry.agent.hosted import Registry

EXPIRES = "cert_expires"  # member metadata: the certificate's notAfter, ISO 8601 UTC
SIGNER = "signer"  # member metadata: "yes" on a broker that signs certificates


def certificate_meta(tls: InternalTls | None) -> dict[str, str]:
    """What a member publishes about its certificate (nothing on a plaintext cluster)."""
    if tls is None:
        return {}
    return {EXPIRES: tls.not_after.isoformat(timespec="seconds").replace("+00:00", "Z")}


def renewal(tls: InternalTls, node: Registry, signer: Signer | None = None) -> Renewal:
    """The renewal loop of a member, publishing each new expiry; run it as a task."""
    return Renewal(tls, signer or RemoteSigner(tls, lambda: node.urls_of("broker", SIGNER)),
                   on_renewed=lambda renewed: node.set_meta(**certificate_meta(renewed)))
