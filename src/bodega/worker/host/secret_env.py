"""An app's secrets as environment variables, read from this worker's registry replica.

Brokers write secrets as sealed shared rows (``broker/secrets/store.py``); every
worker holds a replica of them and the secrets key, so it opens them when
it launches a machine, never storing a value in the machine's config, its
versions, the ops log or the machine object. A row that does not open (a
different cluster's key, tampering) is left out and logged by name only.
"""

from __future__ import annotations

import logging

from bodega.registry import Registry
from bodega.runtime.secretbox import SecretBox, SecretUnreadable

log = logging.getLogger("bodega.worker.secrets")


class SecretEnv:
    def __init__(self, node: Registry, box: SecretBox) -> None:
        self.node = node
        self.box = box

    def __call__(self, app: str) -> dict[str, str]:
        env: dict[str, str] = {}
        for doc in self.node.rows("secrets", app=app):
            name = str(doc.get("name", ""))
            try:
                env[name] = self.box.open(app, name, str(doc.get("sealed", "")))
            except SecretUnreadable:
                log.warning("secret %s of %s does not open: left out", name, app)
        return env
