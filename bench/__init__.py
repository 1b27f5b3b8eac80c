"""bodega's benchmarks, each beside its peer, by family: ``machines`` (create, start,
stop, suspend and isolation of a machine), ``proxy`` (HTTP, TLS and TCP through the proxy,
scale from zero), ``network`` (the private network and its resolver), ``placement``
(creates through the broker), ``registry`` (gossip and the registry at scale), ``jobs``
(batch jobs against Redis queues) and ``cli`` (the command line's own time); ``rigs`` holds
what benches of several families run on. ``python -m bench.headline`` (``make bench``) runs
the headline benches and prints one table."""
