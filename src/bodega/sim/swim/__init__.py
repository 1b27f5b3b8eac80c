"""SWIM on a simulated network and simulated time."""

__all__: list[str] = []
