"""App secrets: sealed at rest, never shown, checked before anything is written."""

from __future__ import annotations

import json

import pytest

from bodega.broker.secrets.store import AppSecrets
from bodega.broker.view.apps import Apps
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.errors import BadRequest, NotFound
from bodega.runtime.secretbox import SecretBox, SecretUnreadable

VALUE = "hunter2-very-secret"


def secrets() -> tuple[AppSecrets, MemoryCatalog]:
    catalog = MemoryCatalog()
    apps = Apps(catalog)
    apps.create("web", "personal", None)
    return AppSecrets(catalog, apps, SecretBox("cluster-secret")), catalog


def test_a_sealed_value_opens_only_for_its_app_name_and_cluster() -> None:
    box = SecretBox("cluster-secret")
    sealed = box.seal("web", "DB", VALUE)
    assert VALUE not in sealed
    assert box.open("web", "DB", sealed) == VALUE
    assert box.seal("web", "DB", VALUE) != sealed  # a fresh nonce each time
    for app, name, other in (("api", "DB", box), ("web", "DB2", box),
                             ("web", "DB", SecretBox("another-cluster"))):
        with pytest.raises(SecretUnreadable):
            other.open(app, name, sealed)


def test_set_list_get_and_delete_never_show_a_value() -> None:
    s, catalog = secrets()
    answer = s.update("web", {"DB": VALUE, "API_KEY": "k"})
    assert answer.version == 1
    assert [x.name for x in answer.secrets] == ["API_KEY", "DB"]
    listed = s.list("web")
    got = s.get("web", "DB")
    assert VALUE not in json.dumps([answer.doc(), listed.doc(), got.doc()])
    assert set(got.doc()) == {"name", "digest", "created_at", "updated_at"}
    stored = catalog.rows("secrets", app="web")
    assert VALUE not in json.dumps(stored)  # only the sealed value is in the cluster
    before = got.digest
    assert s.set("web", "DB", "other").digest != before
    assert s.delete("web", "DB").version == 3
    with pytest.raises(NotFound):
        s.get("web", "DB")
    assert s.update("web", {"API_KEY": None}).secrets == []


def test_bad_names_and_values_are_refused_before_anything_is_written() -> None:
    s, catalog = secrets()
    with pytest.raises(BadRequest) as bad:
        s.update("web", {"GOOD": "x", "1BAD": VALUE})
    assert VALUE not in str(bad.value)
    assert catalog.rows("secrets") == []
    with pytest.raises(BadRequest) as nul:
        s.set("web", "NUL", VALUE + "\x00")
    assert VALUE not in str(nul.value)
    with pytest.raises(NotFound):
        s.list("nope")
