"""Replicas on the simulated network."""

__all__: list[str] = []
