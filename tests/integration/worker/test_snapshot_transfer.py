"""A snapshot's data between workers (``PUT``/``GET /v1/snapshots/{id}/data``): only a
worker may send or fetch one, and a copy whose digest is not its sender's is refused and
leaves nothing behind (docs/volumes.md)."""

from __future__ import annotations

from pathlib import Path

from bodega.wire.internal.worker_calls import SnapshotCopy
from bodega.worker.host.snapshot_tar import pack
from bodega.worker.host.volume_copy import tree_digest
from bodega.worker.ops.snapshot_copies import HEADER
from bodega.worker.store import snapshot_queries
from tests.integration.broker.broker_kit import in_process_cluster
from tests.tls_kit import TEST_CA

SNAPSHOT = "vs_" + "a" * 20


def sent(tmp: Path, rows: bytes = b"x" * 5000) -> tuple[SnapshotCopy, bytes]:
    """A tree of ``rows`` packed as its worker sends it, and what it says it is."""
    tree = tmp / "tree"
    tree.mkdir(parents=True)
    (tree / "rows").write_bytes(rows)
    size, digest = tree_digest(tree)
    pack(tree, tmp / "t.tar")
    meta = SnapshotCopy(id=SNAPSHOT, volume_id="vol_" + "b" * 20, app="kept",
                        digest=digest, size=size, volume_size_gb=1, retention_days=5,
                        created_at=1.0, expires_at=4e9, origin="ams-9")
    return meta, (tmp / "t.tar").read_bytes()


async def test_a_copy_is_kept_once_its_digest_is_checked_and_only_a_worker_may_send_it(
        tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        url = f"{worker.url}/v1/snapshots/{SNAPSHOT}/data"
        meta, body = sent(tmp_path / "good")
        async with TEST_CA.http("broker") as broker, TEST_CA.http("worker", "ams-2") as peer:
            refused = await broker.put(url, content=body,
                                       headers={HEADER: meta.model_dump_json()})
            assert refused.status_code == 403, refused.text
            _, other = sent(tmp_path / "bad", rows=b"y" * 5000)  # not what meta describes
            corrupt = await peer.put(url, content=other,
                                     headers={HEADER: meta.model_dump_json()})
            assert corrupt.status_code == 400, corrupt.text
            assert corrupt.json()["status"] == "invalid_argument", corrupt.text
            assert snapshot_queries.get_snapshot(worker.store.db, SNAPSHOT) is None
            assert list(worker.config.snapshots_dir.iterdir()) == [
                worker.config.snapshots_dir / ".transfers"]
            assert not list((worker.config.snapshots_dir / ".transfers").iterdir())

            kept = await peer.put(url, content=body, headers={HEADER: meta.model_dump_json()})
            assert kept.status_code == 200, kept.text
            assert kept.json()["holders"] == ["ams-9", "ams-1"]
            row = snapshot_queries.get_snapshot(worker.store.db, SNAPSHOT)
            assert row is not None
            assert row.origin == "ams-9"
            assert tree_digest(worker.config.snapshot_dir(SNAPSHOT))[1] == meta.digest

            fetched = await peer.get(url, params={"app": "kept"})
            assert fetched.status_code == 200, fetched.text
            assert SnapshotCopy.model_validate_json(fetched.headers[HEADER]) == meta
            assert (await broker.get(url, params={"app": "kept"})).status_code == 403
            other_app = await peer.get(url, params={"app": "other"})
            assert other_app.status_code == 404, other_app.text


async def test_a_copy_naming_a_path_for_its_id_is_refused(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as c:
        worker = await c.add_worker("ams-1")
        meta, body = sent(tmp_path)
        header = meta.model_dump_json().replace(SNAPSHOT, "..")
        async with TEST_CA.http("worker", "ams-2") as peer:
            # The id "..", percent-encoded so it reaches the route as the snapshot's id:
            # kept, it would be the worker's data dir.
            answer = await peer.put(f"{worker.url}/v1/snapshots/%2E%2E/data", content=body,
                                    headers={HEADER: header})
            assert answer.status_code == 400, answer.text
            assert "not a snapshot id" in answer.json()["error"], answer.text
            assert (worker.config.data_dir / "store.db").exists() or any(
                worker.config.data_dir.iterdir())
