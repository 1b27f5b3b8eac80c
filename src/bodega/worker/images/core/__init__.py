"""Images' pure core: references, manifests and their platforms, the pull plan, and
which images to evict. The store, the unpacker and the registry client do the I/O.

Its modules are imported by their own names.
"""

__all__: list[str] = []
