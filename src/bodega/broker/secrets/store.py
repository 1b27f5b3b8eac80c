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

from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.answer import Answer, from_doc
from bodega.model.errors import BadRequest, NotFound
from bodega.model.machine import rfc3339
from bodega.runtime.secretbox import SecretBox
from bodega.wire.public.secrets import (
    AppSecret,
    SecretDeleted,
    SecretList,
    SecretSet,
    SecretsUpdated,
)

TABLE = "secrets"
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")  # an environment variable's name
MAX_VALUE = 64 * 1024
MAX_SECRETS = 256


class SecretRow(Answer):
    """A secret's row in the view: its value sealed, never in the clear."""

    key: str  # <app>/<name>
    app: str
    name: str
    sealed: str
    digest: str
    created_at: str
    updated_at: str
    version: int = 0  # the app's secrets version when it was last set

    def answer(self) -> AppSecret:
        return AppSecret(name=self.name, digest=self.digest, created_at=self.created_at,
                         updated_at=self.updated_at)


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

    def _rows(self, app: str) -> list[SecretRow]:
        rows = [r for doc in self.catalog.rows(TABLE, app=app)
                if (r := from_doc(SecretRow, doc)) is not None]
        return sorted(rows, key=lambda r: r.name)

    def version(self, app: str) -> int:
        return max((r.version for r in self._rows(app)), default=0)

    def list(self, app: str) -> SecretList:
        self.apps.require(app)
        return SecretList(secrets=[r.answer() for r in self._rows(app)])

    def get(self, app: str, name: str) -> AppSecret:
        self.apps.require(app)
        row = from_doc(SecretRow, self.catalog.get(TABLE, f"{app}/{name}"))
        if row is None:
            raise NotFound(f"secret not found: {name}")
        return row.answer()

    def update(self, app: str, values: Mapping[str, str | None]) -> SecretsUpdated:
        """Set (a value) or unset (None) several secrets; all are checked before any is written."""
        self.apps.require(app)
        for name, value in values.items():
            check_name(name)
            if value is not None:
                check_value(name, value)
        current = {r.name for r in self._rows(app)}
        added = {n for n, v in values.items() if v is not None} - current
        if len(current) + len(added) > MAX_SECRETS:
            raise BadRequest(f"at most {MAX_SECRETS} secrets per app")
        version = self.version(app) + 1
        for name, value in values.items():
            if value is None:
                self.catalog.delete_shared(TABLE, f"{app}/{name}")
            else:
                self._put(app, name, value, version)
        return SecretsUpdated(secrets=[r.answer() for r in self._rows(app)], version=version,
                              Version=version)

    def set(self, app: str, name: str, value: str) -> SecretSet:
        self.apps.require(app)
        check_name(name)
        check_value(name, value)
        version = self.version(app) + 1
        row = self._put(app, name, value, version)
        return SecretSet(**row.answer().model_dump(exclude_none=True), version=version,
                         Version=version)

    def delete(self, app: str, name: str) -> SecretDeleted:
        self.apps.require(app)
        if self.catalog.get(TABLE, f"{app}/{name}") is None:
            raise NotFound(f"secret not found: {name}")
        version = self.version(app) + 1
        self.catalog.delete_shared(TABLE, f"{app}/{name}")
        return SecretDeleted(version=version, Version=version)

    def _put(self, app: str, name: str, value: str, version: int) -> SecretRow:
        key = f"{app}/{name}"
        old = from_doc(SecretRow, self.catalog.get(TABLE, key))
        now = rfc3339(time.time())
        row = SecretRow(key=key, app=app, name=name, sealed=self.box.seal(app, name, value),
                        digest=self.box.digest(app, name, value),
                        created_at=old.created_at if old else now, updated_at=now,
                        version=version)
        self.catalog.put_shared(TABLE, key, row.doc())
        return row


def remove_all(catalog: Catalog, app: str) -> None:
    """Forget every secret of ``app`` (it is being deleted: a new app of that name starts bare)."""
    for doc in catalog.rows(TABLE, app=app):
        catalog.delete_shared(TABLE, str(doc["key"]))
