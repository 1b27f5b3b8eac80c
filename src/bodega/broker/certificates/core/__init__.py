"""The certificates room's pure core: a certificate's answers, from its rows.

Its modules are imported by their own names.
"""

__all__: list[str] = []
