"""App secrets: shared rows of the view, sealed, that any broker may write and any worker open.

A secret is a row of the registry's ``secrets`` table keyed ``<app>/<name>``
holding the value sealed with the cluster's key (``runtime/secretbox.py``),
a keyed digest, its times and the app's secrets version when it was last
set. Answers never carry a value (the Machines API shows values only when
asked with ``show_secrets``; bodega never does). Setting or unsetting
restarts nothing: a machine reads its app's secrets from its worker's replica
each time it is launched (created, updated, started, restarted).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from bodega.broker.apps import Apps
from bodega.broker.catalog import Catalog
from bodega.model.errors import BadRequest, NotFound
from bodega.model.machine import rfc3339
from bodega.runtime.secretbox import SecretBox

TABLE = "secrets"
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")  # an environment variable's name
MAX_VALUE = 64 * 1024
MAX_SECRETS = 256
PUBLIC = ("name", "digest", "created_at", "updated_at")


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise BadRequest(f"invalid secret name {name[:40]!r}: letters, digits and _, not "
                         "starting with a digit, at most 128 (it becomes an environment "
                         "variable)")


def check_value(name: str, value: str) -> None:
    # The message names the secret, never its value.
    if len(value.encode()) > MAX_VALUE:
        raise BadRequest(f"secret {name}: the value is over {MAX_VALUE // 1024} KiB")
    if "\x00" in value:
        raise BadRequest(f"secret {name}: the value holds a NUL character")


class AppSecrets:
    def __init__(self, catalog: Catalog, apps: Apps, box: SecretBox) -> None:
        self.catalog = catalog
        self.apps = apps
        self.box = box

    def _rows(self, app: str) -> list[dict[str, Any]]:
        return sorted(self.catalog.rows(TABLE, app=app), key=lambda d: str(d["name"]))

    def version(self, app: str) -> int:
        return max((int(d.get("version", 0)) for d in self._rows(app)), default=0)

    def list(self, app: str) -> dict[str, Any]:
        self.apps.require(app)
        return {"secrets": [public(d) for d in self._rows(app)]}

    def get(self, app: str, name: str) -> dict[str, Any]:
        self.apps.require(app)
        doc = self.catalog.get(TABLE, f"{app}/{name}")
        if doc is None:
            raise NotFound(f"secret not found: {name}")
        return public(doc)

    def update(self, app: str, values: Mapping[str, str | None]) -> dict[str, Any]:
        """Set (a value) or unset (None) several secrets; all are checked before any is written."""
        self.apps.require(app)
        for name, value in values.items():
            check_name(name)
            if value is not None:
                check_value(name, value)
        current = {str(d["name"]) for d in self._rows(app)}
        added = {n for n, v in values.items() if v is not None} - current
        if len(current) + len(added) > MAX_SECRETS:
            raise BadRequest(f"at most {MAX_SECRETS} secrets per app")
        version = self.version(app) + 1
        for name, value in values.items():
            if value is None:
                self.catalog.delete_shared(TABLE, f"{app}/{name}")
            else:
                self._put(app, name, value, version)
        return {"secrets": [public(d) for d in self._rows(app)], "version": version,
                "Version": version}

    def set(self, app: str, name: str, value: str) -> dict[str, Any]:
        self.apps.require(app)
        check_name(name)
        check_value(name, value)
        version = self.version(app) + 1
        doc = self._put(app, name, value, version)
        return {**public(doc), "version": version, "Version": version}

    def delete(self, app: str, name: str) -> dict[str, Any]:
        self.apps.require(app)
        if self.catalog.get(TABLE, f"{app}/{name}") is None:
            raise NotFound(f"secret not found: {name}")
        version = self.version(app) + 1
        self.catalog.delete_shared(TABLE, f"{app}/{name}")
        return {"version": version, "Version": version}

    def _put(self, app: str, name: str, value: str, version: int) -> dict[str, Any]:
        key = f"{app}/{name}"
        old = self.catalog.get(TABLE, key)
        now = rfc3339(time.time())
        doc = {"key": key, "app": app, "name": name,
               "sealed": self.box.seal(app, name, value),
               "digest": self.box.digest(app, name, value),
               "created_at": old["created_at"] if old else now, "updated_at": now,
               "version": version}
        self.catalog.put_shared(TABLE, key, doc)
        return doc


def public(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: doc[k] for k in PUBLIC if k in doc}


def remove_all(catalog: Catalog, app: str) -> None:
    """Forget every secret of ``app`` (it is being deleted: a new app of that name starts bare)."""
    for doc in catalog.rows(TABLE, app=app):
        catalog.delete_shared(TABLE, str(doc["key"]))
