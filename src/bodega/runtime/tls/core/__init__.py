"""Identity's pure core: who a certificate names, the CA's decisions (sign under a
grant, check a peer, when to renew), who may call which internal route, join
tokens, and the sites' certificates.

Its modules are imported by their own names.
"""

__all__: list[str] = []
