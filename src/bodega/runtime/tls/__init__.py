"""Identity and mutual TLS for bodega's internal links.

Pure, in ``core/``: ``identity`` (who a certificate names), ``pki`` (the CA,
CSRs, signing under a grant, checking a peer, when to renew), ``access`` (route
-> roles), ``join_token``, ``sites``. Beside it: ``files`` (where keys and
certificates live), ``authority`` (the CA
signing), ``contexts`` (a component's server and client SSL contexts),
``gate`` (the server handshake, counted) and ``renewal`` (a new certificate
before the old one expires, with no restart).
"""

from bodega.runtime.tls.authority import CertificateAuthority, CertificateRequest, Issued
from bodega.runtime.tls.contexts import InternalTls, Peer, TlsUnusable
from bodega.runtime.tls.core.identity import Identity, Refused
from bodega.runtime.tls.core.pki import Grant
from bodega.runtime.tls.files import CaDir, TlsDir, TlsMissing

__all__ = [
    "CaDir",
    "CertificateAuthority",
    "CertificateRequest",
    "Grant",
    "Identity",
    "InternalTls",
    "Issued",
    "Peer",
    "Refused",
    "TlsDir",
    "TlsMissing",
    "TlsUnusable",
]
