"""Peer sync: rows on gossip, anti-entropy, the peer routes and their client."""

__all__: list[str] = []
