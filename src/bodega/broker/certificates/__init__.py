"""The certificates the edge serves: the store, its routes and answers, each app's
default certificate. Imports auth and the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
