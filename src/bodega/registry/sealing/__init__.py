"""Sealed gossip: the keyring, sealing and opening packets, key rotation."""

__all__: list[str] = []
