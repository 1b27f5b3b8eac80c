"""App secret keys: keys kept sealed in the view, used by the broker, never handed out.

A key is a shared row of the registry's ``secretkeys`` table keyed ``<app>/<name>``:
its type, its material sealed with the cluster's key (``runtime/secretbox.py``, the
associated data naming app and key, so a row copied under another name does not
open), its public key if it has one, its times and the app's secrets version when it
was last written. Any broker can open it, so any broker encrypts, decrypts, signs and
verifies with it (``runtime/key_types.py``); no answer carries the material.

A deleted key leaves a tombstone row (``deleted``) holding the version it was deleted
at, so the app's secrets version (shared with its secrets) never goes back, and
``min_version`` means what it says: a broker whose view has not reached it answers
412 instead of an older answer.
"""

from __future__ import annotations

import base64
import time

from bodega.broker.secrets.store import NAME_RE
from bodega.broker.secrets.store import TABLE as SECRETS
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import Catalog
from bodega.model.answer import Answer, from_doc
from bodega.model.errors import BadRequest, NotFound, PreconditionFailed
from bodega.model.machine import rfc3339
from bodega.runtime import key_types
from bodega.runtime.key_types import KeyMaterial, KeyRefused
from bodega.runtime.secretbox import SecretBox, SecretUnreadable
from bodega.wire.public.secret_keys import SecretKey, SecretKeyDeleted, SecretKeys, SecretKeySet

TABLE = "secretkeys"
MAX_KEYS = 256


class SecretKeyRow(Answer):
    """A key's row in the view: its material sealed, never in the clear."""

    key: str  # <app>/<name>
    app: str
    name: str
    type: str = ""
    sealed: str = ""
    public_key: str | None = None  # base64
    created_at: str = ""
    updated_at: str = ""
    version: int = 0
    deleted: bool = False

    def answer(self) -> SecretKey:
        public = list(base64.b64decode(self.public_key)) if self.public_key else None
        return SecretKey(name=self.name, type=self.type, created_at=self.created_at,
                         updated_at=self.updated_at, public_key=public)


def check_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise BadRequest(f"invalid secret key name {name[:40]!r}: letters, digits and _, "
                         "not starting with a digit, at most 128")


class AppSecretKeys:
    def __init__(self, catalog: Catalog, apps: Apps, box: SecretBox) -> None:
        self.catalog = catalog
        self.apps = apps
        self.box = box

    # -- reading ------------------------------------------------------------------------------
    def _rows(self, app: str) -> list[SecretKeyRow]:
        rows = [r for doc in self.catalog.rows(TABLE, app=app)
                if (r := from_doc(SecretKeyRow, doc)) is not None]
        return sorted(rows, key=lambda r: r.name)

    def _row(self, app: str, name: str) -> SecretKeyRow:
        row = from_doc(SecretKeyRow, self.catalog.get(TABLE, f"{app}/{name}"))
        if row is None or row.deleted:
            raise NotFound(f"secret key not found: {name[:128]}")
        return row

    def version(self, app: str) -> int:
        """The app's secrets version: the highest any secret or key (deleted ones too) holds."""
        versions = [r.version for r in self._rows(app)]
        versions += [int(doc.get("version") or 0) for doc in self.catalog.rows(SECRETS, app=app)]
        return max(versions, default=0)

    def require(self, app: str, min_version: str | None) -> None:
        """The app exists, and this broker's view has reached ``min_version`` of its secrets."""
        self.apps.require(app)
        if min_version is None or min_version == "":
            return
        try:
            wanted = int(min_version)
        except ValueError:
            raise BadRequest("invalid_argument: min_version must be an integer") from None
        have = self.version(app)
        if have < wanted:
            raise PreconditionFailed(f"this broker has seen secrets version {have} of {app}, "
                                     f"not yet {wanted}: retry shortly")

    def list(self, app: str, types: str | None, min_version: str | None) -> SecretKeys:
        self.require(app, min_version)
        wanted = {t.strip() for t in types.split(",") if t.strip()} if types else None
        return SecretKeys(secret_keys=[r.answer() for r in self._rows(app) if not r.deleted
                                       and (wanted is None or r.type in wanted)])

    def get(self, app: str, name: str, min_version: str | None) -> SecretKey:
        self.require(app, min_version)
        return self._row(app, name).answer()

    def material(self, app: str, name: str, min_version: str | None) -> KeyMaterial:
        """The key to use, opened here and never returned to a client."""
        self.require(app, min_version)
        row = self._row(app, name)
        try:
            raw = base64.b64decode(self.box.open(app, f"secretkey:{name}", row.sealed))
        except SecretUnreadable:
            raise BadRequest(f"secret key {name} does not open with this cluster's key") \
                from None
        return KeyMaterial(row.type, raw)

    # -- writing ------------------------------------------------------------------------------
    def set(self, app: str, name: str, key_type: str, value: bytes | None) -> SecretKeySet:
        """Set a key from ``value`` (``set``), or from fresh random bytes (``generate``)."""
        self.apps.require(app)
        check_name(name)
        try:
            key = key_types.generate(key_type) if value is None else \
                key_types.from_value(key_type, value)
        except KeyRefused as exc:
            raise BadRequest(f"secret key {name}: {exc}") from None
        live = [r for r in self._rows(app) if not r.deleted]
        if name not in {r.name for r in live} and len(live) >= MAX_KEYS:
            raise BadRequest(f"at most {MAX_KEYS} secret keys per app")
        version = self.version(app) + 1
        old = from_doc(SecretKeyRow, self.catalog.get(TABLE, f"{app}/{name}"))
        now = rfc3339(time.time())
        public = key.public_key()
        row = SecretKeyRow(
            key=f"{app}/{name}", app=app, name=name, type=key.type,
            sealed=self.box.seal(app, f"secretkey:{name}",
                                 base64.b64encode(key.material).decode()),
            public_key=base64.b64encode(public).decode() if public else None,
            created_at=old.created_at if old and not old.deleted else now, updated_at=now,
            version=version)
        self.catalog.put_shared(TABLE, row.key, row.doc())
        return SecretKeySet(**row.answer().model_dump(exclude_none=True), version=version,
                            Version=version)

    def delete(self, app: str, name: str) -> SecretKeyDeleted:
        self.apps.require(app)
        row = self._row(app, name)
        version = self.version(app) + 1
        tombstone = SecretKeyRow(key=row.key, app=app, name=name, version=version, deleted=True,
                                 updated_at=rfc3339(time.time()))
        self.catalog.put_shared(TABLE, row.key, tombstone.doc())
        return SecretKeyDeleted(version=version, Version=version)


def remove_all(catalog: Catalog, app: str) -> None:
    """Forget every key of ``app`` (it is being deleted: a new app of that name starts bare)."""
    for doc in catalog.rows(TABLE, app=app):
        catalog.delete_shared(TABLE, str(doc["key"]))
