"""The replica's pure decisions: rows, versions, merge, the schema."""

__all__: list[str] = []
