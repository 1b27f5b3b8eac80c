"""The proxy's pure core: which backend gets a request, what load a backend carries,
the routing table and the TCP services' table, the sites served at the edge, the
PROXY protocol header, and where a request is replayed. The proxy's shells (the
server, the activator, wake and autostop, the data plane) act on what it decides.

Its modules are imported by their own names.
"""

__all__: list[str] = []
