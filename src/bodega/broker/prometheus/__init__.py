"""PromQL per org through the broker, and the targets its host's metrics store scrapes."""

__all__: list[str] = []
