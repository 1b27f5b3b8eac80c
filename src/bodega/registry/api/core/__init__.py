"""The public API's pure decisions: tables, policy, changes, bounds."""

__all__: list[str] = []
