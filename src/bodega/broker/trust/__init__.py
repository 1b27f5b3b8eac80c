"""The cluster's trust: hosts joining with a join token (the listener, what it signs) and
the gossip keyring's routes. Imports auth and the broker's config.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
