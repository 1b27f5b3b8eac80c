"""The worker (flyd): the single source of truth for everything on its host."""
