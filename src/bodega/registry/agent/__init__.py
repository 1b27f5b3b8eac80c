"""The registry agent (`bodega agent`) and what a host's processes use of it."""

__all__: list[str] = []
