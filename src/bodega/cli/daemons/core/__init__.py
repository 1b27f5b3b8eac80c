"""The daemons' pure decisions: which flag moves a listener that could not bind.
"""

__all__: list[str] = []
