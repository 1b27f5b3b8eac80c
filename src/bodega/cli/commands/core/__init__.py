"""The commands' pure decisions: how a machine's state and its standby pairs are shown.
"""

__all__: list[str] = []
