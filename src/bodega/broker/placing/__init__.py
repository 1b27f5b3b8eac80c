"""Placement inside the broker: the reserve loop over a region's ranking (``placer``),
the record that explains each decision, what a placement that found no room says, and
the shadow policy ranked beside the real one. Imports the view and the broker's metrics.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
