"""The host's pure core: the name of every kernel object the worker makes (and whose
each is), and the user a machine runs as. The host's shells make and sweep them.

Its modules are imported by their own names.
"""

__all__: list[str] = []
