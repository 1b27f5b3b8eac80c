"""Settings every test shares.

Hypothesis runs with no per-example deadline: tests assert behaviour, never wall-clock
time, and a property must not fail because a busy host ran one example slowly.
"""

from hypothesis import settings

settings.register_profile("bodega", deadline=None)
settings.load_profile("bodega")
