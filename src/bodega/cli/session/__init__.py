"""What every command shares: which cluster it talks to with which token (contexts, the
contexts file, the target's precedence), which app it is about, how an answer is shown,
and how an error becomes one readable line.
"""

__all__: list[str] = []
