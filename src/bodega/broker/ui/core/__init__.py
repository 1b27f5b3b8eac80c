"""The dashboard's pure core: what a screen shows, decided from rows and answers (the
rows as the dashboard reads them, a bar's geometry, the topology and its pages,
refusals, the app, machine and member screens, the session rules).

Its modules are imported by their own names.
"""

__all__: list[str] = []
