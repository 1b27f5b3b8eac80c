"""Volumes: the service, their routes, an org's list. Imports machines (a volume follows
its machine's host), placing, auth and the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
