"""Peer sync's pure decisions: whom to pull from, rows on the wire."""

__all__: list[str] = []
