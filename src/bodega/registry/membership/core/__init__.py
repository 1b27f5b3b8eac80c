"""SWIM's pure core: the state machine and what it is built from."""

__all__: list[str] = []
