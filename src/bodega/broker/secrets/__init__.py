"""An app's secrets, sealed at rest, and its secret keys, with their routes. Imports auth
and the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
