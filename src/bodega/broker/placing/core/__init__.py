"""The placing room's pure core: the typed record of a placement decision, and the
shadow policy.

Its modules are imported by their own names.
"""

__all__: list[str] = []
