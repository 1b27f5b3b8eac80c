"""The row models: a row as a worker of this or an older version wrote it reads, with
columns a newer peer adds ignored, and a typed read gets the model from any view."""

from __future__ import annotations

from typing import Any

from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.rows import (
    AppRow,
    IpAssignmentRow,
    OverlayAdvert,
    TokenRow,
    WorkerRow,
    read_rows,
)
from bodega.wire.public.releases import Release

# A workers row exactly as the publisher wrote it as a literal dict, before the model.
OLD_ROW: dict[str, Any] = {
    "name": "ams-1", "region": "ams", "url": "https://10.1.0.1:4000", "driver": "oci",
    "totals": {"cpus": 8, "memory_mb": 8192, "disk_gb": 100, "gpus": {},
               "shared_cpu_ratio": 4.0, "cpu_kinds": ["shared", "performance"],
               "isolations": ["container"], "vm_accel": ""},
    "used": {"millicpus": 250, "memory_mb": 256, "disk_gb": 0, "gpus": {}},
    "free": {"millicpus": 7750, "cpus": 7.75, "memory_mb": 7936, "disk_gb": 100, "gpus": {},
             "summary": "7.75 cpus, 7936 MB memory, 100 GB disk free"},
    "cordoned": False, "reservations": 0, "machines": 1, "subnet": "10.209.1.0/24",
    "images": ["sha256:abc"], "image_disk_gb": 1,
    "wireguard": {"public_key": "K=", "endpoint": "10.1.0.1:51820",
                  "block": "fdaa:1:2:1::/64", "interface": "bwg1"},
    "updated_at": "2026-01-02T03:04:05Z",
}


def test_a_row_an_older_worker_wrote_reads_and_writes_back_the_same() -> None:
    row = WorkerRow.model_validate(OLD_ROW)
    assert (row.totals.cpus, row.used.millicpus, row.subnet) == (8, 250, "10.209.1.0/24")
    assert row.wireguard == OverlayAdvert(public_key="K=", endpoint="10.1.0.1:51820",
                                          block="fdaa:1:2:1::/64", interface="bwg1")
    assert row.doc() == OLD_ROW  # the wire format is the one it was


def test_a_newer_peers_column_is_ignored_and_an_older_ones_missing_ones_default() -> None:
    row = WorkerRow.model_validate({**OLD_ROW, "gpu_topology": {"a100": [0, 1]}})
    assert "gpu_topology" not in row.doc()
    bare = {k: OLD_ROW[k] for k in ("name", "region", "url", "totals", "cordoned")}
    old = WorkerRow.model_validate(bare)
    assert (old.machines, old.free, old.wireguard, old.images, old.used.millicpus) == (
        0, None, None, None, 0)


def test_a_view_read_by_model_gets_the_rows_it_can_read_and_leaves_out_the_rest() -> None:
    catalog = MemoryCatalog()
    catalog.put("workers", "ams-1", OLD_ROW)
    catalog.put("workers", "ams-2", {**OLD_ROW, "name": "ams-2", "totals": "lots"})
    catalog.put("workers", "syd-1", {**OLD_ROW, "name": "syd-1", "region": "syd"})
    assert [r.name for r in catalog.rows(WorkerRow, region="ams")] == ["ams-1"]
    assert sorted(r.name for r in catalog.rows(WorkerRow)) == ["ams-1", "syd-1"]
    assert catalog.get(WorkerRow, "ams-2") is None  # unreadable: as if absent
    found = catalog.get(WorkerRow, "syd-1")
    assert found is not None
    assert found.region == "syd"
    assert catalog.rows("workers", region="ams")[0] == OLD_ROW  # documents, as before
    assert read_rows(WorkerRow, [OLD_ROW, {"name": "x"}]) == [WorkerRow.model_validate(OLD_ROW)]


def test_an_apps_row_reads_as_brokers_wrote_it_and_a_typed_read_finds_it_by_org() -> None:
    written = {"id": "0123456789ab", "name": "web", "org_slug": "acme", "network": "blue",
               "created_at": 1700000000.5}
    catalog = MemoryCatalog()
    catalog.put("apps", "web", written)
    catalog.put("apps", "api", {"name": "api", "org_slug": "personal"})  # no network: default
    assert [r.name for r in catalog.rows(AppRow, org_slug="acme")] == ["web"]
    web, api = catalog.get(AppRow, "web"), catalog.get(AppRow, "api")
    assert web is not None
    assert web.doc() == written
    assert api is not None
    assert (api.network, api.org_slug) == ("default", "personal")


def test_an_ip_assignment_row_reads_as_brokers_wrote_it_under_its_key() -> None:
    written = {"app": "web", "ip": "fdaa:1:2::5", "type": "private_v6", "region": "global",
               "shared": False, "created_at": "2026-01-02T03:04:05Z"}
    catalog = MemoryCatalog()
    catalog.put("ip_assignments", "web/fdaa:1:2::5", written)
    (row,) = catalog.rows(IpAssignmentRow, app="web")
    assert (row.key, row.type, row.doc()) == ("web/fdaa:1:2::5", "private_v6", written)


def test_a_release_row_is_read_by_app_as_the_model_the_api_answers() -> None:
    written = {"id": "web/v2", "app": "web", "version": 2, "status": "complete",
               "strategy": "rolling", "image": "img:2", "config": {"app": "web"},
               "user": "me", "created_at": "t", "updated_at": "t"}
    catalog = MemoryCatalog()
    catalog.put("releases", "web/v2", written)
    catalog.put("releases", "api/v1", {**written, "id": "api/v1", "app": "api", "version": 1})
    (release,) = catalog.rows(Release, app="web")
    assert (release.version, release.config, release.doc()) == (2, {"app": "web"}, written)


def test_a_token_row_reads_as_brokers_wrote_it_and_is_found_by_its_hash() -> None:
    written = {"id": "tok_1", "token_hash": "abc", "scope": "app:web", "created_at": 1.5,
               "expires_at": 2.5}
    catalog = MemoryCatalog()
    catalog.put("tokens", "tok_1", written)
    (row,) = catalog.rows(TokenRow, token_hash="abc")
    assert (row.scope, row.expires_at, row.doc()) == ("app:web", 2.5, written)
