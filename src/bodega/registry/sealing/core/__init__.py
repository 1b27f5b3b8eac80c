"""Sealing's pure core: keys, sealed packets, replay windows, rotation."""

__all__: list[str] = []
