"""The commands that run bodega's daemons: a worker, broker, proxy, registry agent or image
registry alone, or a whole host of them (``bodega up``, ``bodega join``), and what they
share (``options``: the flags every daemon takes; internal TLS, the gossip keyring, the
one line a taken port deserves).
"""

__all__: list[str] = []
