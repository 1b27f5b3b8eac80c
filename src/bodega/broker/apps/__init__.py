"""Apps: their routes, deleting one with everything under it (machines, volumes,
secrets, certificates, tokens), releases and IP assignments. Imports every room below it:
machines, volumes, secrets, certificates, auth and the view (app rows live in the view).
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
