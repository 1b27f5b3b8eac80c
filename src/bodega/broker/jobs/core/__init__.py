"""The jobs room's pure core: the index of jobs, and where each lives.

Its modules are imported by their own names.
"""

__all__: list[str] = []
