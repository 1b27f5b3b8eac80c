"""Platform endpoints: simulated placements, regions and their room, members. Imports
machines, auth and the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
