"""The metadata keys a deploy writes on the machines it makes, and the default group.

Fly's own keys, so flyctl and bodega read each other's machines. A module of its
own, with no imports, so `bodega status` reads machines without loading the
bodega.toml models.
"""

DEFAULT_GROUP = "app"
GROUP_KEY = "fly_process_group"
RELEASE_KEY = "fly_release_version"
