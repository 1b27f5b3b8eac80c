"""The machines room's pure core: which standbys start for a machine, and an org's
list of machines (its query, cursor and pages).

Its modules are imported by their own names.
"""

__all__: list[str] = []
