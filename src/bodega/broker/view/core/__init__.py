"""The view's pure core: how fresh a row is and which copy replaces which, whether a
host answers, and the machine index.

Its modules are imported by their own names.
"""

__all__: list[str] = []
