"""The volumes room's pure core: an org's list of volumes (its query and pages).

Its modules are imported by their own names.
"""

__all__: list[str] = []
