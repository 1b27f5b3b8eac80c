"""The drain and rebalance planners: pure decisions over the facts they are given.

Its modules are imported by their own names.
"""

__all__: list[str] = []
