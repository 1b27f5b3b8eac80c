"""The image store on a real directory: verification, held images, shared blobs on removal."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

from bodega.worker.images.core.manifest import parse_manifest
from bodega.worker.images.core.reference import parse_reference
from bodega.worker.images.store import ImageStore


def tar_of(files: dict[str, bytes]) -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return data.getvalue()


def add_image(store: ImageStore, layers: list[bytes], name: str) -> str:
    config = store.put_blob(json.dumps({"config": {"Cmd": ["/x"]}}).encode())
    digests = [store.put_blob(layer) for layer in layers]
    manifest = json.dumps({
        "schemaVersion": 2, "config": {"digest": config, "size": 1},
        "layers": [{"digest": d, "size": 1} for d in digests]}).encode()
    digest = store.put_blob(manifest)
    store.record_ref(parse_reference(name), digest, name)
    store.unpack(digest, parse_manifest(manifest))
    return digest


def test_store_verifies_lists_held_images_and_keeps_shared_blobs(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    base = tar_of({"etc/os": b"base"})
    first = add_image(store, [base, tar_of({"a": b"1"})], "reg.io/a:v1")
    second = add_image(store, [base, tar_of({"b": b"2"})], "reg.io/b:v1")
    assert (store.rootfs(second) / "etc" / "os").read_bytes() == b"base"
    os.utime(store.base_dir(first), (1, 1))  # the first was used long ago
    held = store.held()
    assert held[:2] == [second, "reg.io/b:v1"]
    assert held[2:] == [first, "reg.io/a:v1"]
    assert store.disk_gb() == 1

    base_blob = store.blob_path(parse_manifest(
        store.blob_path(first).read_bytes()).layers[0].digest)
    base_blob.write_bytes(b"truncated")
    assert not store.verified("sha256:" + base_blob.name)
    base_blob.write_bytes(base)

    store.remove(first)
    assert store.held() == [second, "reg.io/b:v1"]
    assert base_blob.exists(), "a layer the other image shares is kept"
    assert store.view(parse_reference("reg.io/b:v1")).unpacked
    assert store.view(parse_reference("reg.io/a:v1")).manifest_digest is None
