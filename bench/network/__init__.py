"""The private network: the WireGuard overlay against the plain link, and the resolver
against dnsmasq (``private``, with ``resolver``)."""
