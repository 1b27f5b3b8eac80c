"""The session's pure decisions: contexts as data (parsed, rendered, changed) and which
cluster and token a command uses (the precedence of flags, environment and contexts).
"""

__all__: list[str] = []
