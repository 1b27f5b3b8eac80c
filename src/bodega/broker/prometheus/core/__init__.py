"""The pure parts: the targets from the view, and whose series a caller sees."""

__all__: list[str] = []
