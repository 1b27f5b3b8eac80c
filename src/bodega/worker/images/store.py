"""The worker's content-addressed image store, shared by every machine on it.

```
images/blobs/sha256/<hex>      manifests, configs, layers: each named by its digest
images/refs/<key>.json         a reference resolved: {"reference", "digest"}
images/bases/<hex>/rootfs      the unpacked, read-only base of manifest <hex>
images/bases/<hex>/image.json  its image config; the directory's mtime is its last use
```

Every write lands under a temporary name and is renamed into place once
complete and verified, so a crash leaves either nothing or a whole file, and
the store's content is the pull's durable progress (``plan.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from bodega.worker.images.core.eviction import CachedImage
from bodega.worker.images.core.manifest import (
    BadImage,
    ImageConfig,
    Manifest,
    parse_config,
    parse_manifest,
)
from bodega.worker.images.core.plan import PullView, needed_blobs
from bodega.worker.images.core.reference import ImageReference
from bodega.worker.images.unpack import apply_layer

HELD_LIMIT = 32  # images a worker publishes as held


def hex_of(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    if algorithm != "sha256" or len(value) != 64:
        raise BadImage(f"unsupported digest {digest!r}")
    return value


def base_rootfs(root: Path, digest: str) -> Path:
    """Where the store at ``root`` keeps manifest ``digest``'s unpacked base."""
    return root / "bases" / hex_of(digest) / "rootfs"


class ImageStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.blobs = root / "blobs" / "sha256"
        self.refs = root / "refs"
        self.bases = root / "bases"
        for path in (self.blobs, self.refs, self.bases):
            path.mkdir(parents=True, exist_ok=True)
        self._disk_bytes: int | None = None  # measured lazily, again after each change

    # -- blobs -------------------------------------------------------------------
    def blob_path(self, digest: str) -> Path:
        return self.blobs / hex_of(digest)

    def verified(self, digest: str) -> bool:
        """The blob is present and hashes to its digest (a truncated or corrupt one is not)."""
        path = self.blob_path(digest)
        hasher = hashlib.sha256()
        try:
            with path.open("rb") as data:
                while chunk := data.read(1 << 20):
                    hasher.update(chunk)
        except FileNotFoundError:
            return False
        return hasher.hexdigest() == hex_of(digest)

    def partial(self, digest: str) -> Path:
        return self.blobs / f"{hex_of(digest)}.partial"

    def commit_blob(self, digest: str, arrived: str) -> None:
        """Keep a downloaded blob under its digest only if it hashed to it."""
        partial = self.partial(digest)
        if arrived != digest:
            partial.unlink(missing_ok=True)
            raise BadImage(f"blob {digest} arrived as {arrived}: refusing it")
        with partial.open("rb") as data:
            os.fsync(data.fileno())
        partial.rename(self.blob_path(digest))

    def put_blob(self, data: bytes) -> str:
        digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
        partial = self.partial(digest)
        partial.write_bytes(data)
        self.commit_blob(digest, digest)
        return digest

    # -- references ----------------------------------------------------------------
    def _ref_file(self, ref: ImageReference) -> Path:
        return self.refs / f"{hashlib.sha256(str(ref).encode()).hexdigest()[:32]}.json"

    def resolved(self, ref: ImageReference) -> str | None:
        if ref.digest:
            return ref.digest
        try:
            return str(json.loads(self._ref_file(ref).read_text())["digest"])
        except (OSError, ValueError, KeyError):
            return None

    def record_ref(self, ref: ImageReference, digest: str, image: str = "") -> None:
        """Remember what ``ref`` resolved to, and ``image`` as a machine's config spelled it."""
        path = self._ref_file(ref)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"reference": str(ref), "image": image or str(ref),
                                   "digest": digest}))
        tmp.rename(path)

    def held(self, limit: int = HELD_LIMIT) -> list[str]:
        """The ``limit`` most recently used complete images: each digest, then its names.

        What a worker publishes so placement can prefer it for an image it holds; cheap
        (directory listings), since it runs on every capacity refresh.
        """
        names: dict[str, list[str]] = {}
        for ref_file in self.refs.glob("*.json"):
            try:
                doc = json.loads(ref_file.read_text())
            except (OSError, ValueError):
                continue
            known = names.setdefault(str(doc.get("digest")), [])
            for name in (doc.get("reference"), doc.get("image")):
                if name and name not in known:
                    known.append(str(name))
        bases = []
        for base in self.bases.iterdir():
            with contextlib.suppress(OSError):
                if (base / "image.json").exists():
                    bases.append((base.stat().st_mtime, f"sha256:{base.name}"))
        held: list[str] = []
        for _, digest in sorted(bases, reverse=True)[:limit]:
            held += [digest, *names.get(digest, [])]
        return held

    def forget_ref(self, ref: ImageReference) -> None:
        self._ref_file(ref).unlink(missing_ok=True)

    # -- the pull's view -----------------------------------------------------------
    def view(self, ref: ImageReference) -> PullView:
        digest = self.resolved(ref)
        if digest is None:
            return PullView(None, None, frozenset(), False)
        if self.complete(digest):
            return PullView(digest, None, frozenset(), True)
        manifest: Manifest | None = None
        if self.verified(digest):
            manifest = parse_manifest(self.blob_path(digest).read_bytes())
        have = frozenset(d for d in needed_blobs(manifest) if self.verified(d)) if manifest \
            else frozenset()
        return PullView(digest, manifest, have, False)

    # -- bases ----------------------------------------------------------------------
    def base_dir(self, digest: str) -> Path:
        return self.bases / hex_of(digest)

    def rootfs(self, digest: str) -> Path:
        return base_rootfs(self.root, digest)

    def complete(self, digest: str) -> bool:
        return (self.base_dir(digest) / "image.json").exists()

    def image_config(self, digest: str) -> ImageConfig:
        return parse_config((self.base_dir(digest) / "image.json").read_bytes())

    def unpack(self, digest: str, manifest: Manifest) -> None:
        """Apply every layer into a fresh directory, then rename it into place (blocking)."""
        config = parse_config(self.blob_path(manifest.config.digest).read_bytes())
        work = self.bases / f"{hex_of(digest)}.unpacking"
        shutil.rmtree(work, ignore_errors=True)
        (work / "rootfs").mkdir(parents=True)
        for layer in manifest.layers:
            apply_layer(self.blob_path(layer.digest), work / "rootfs")
        (work / "image.json").write_text(config.model_dump_json(by_alias=True))
        shutil.rmtree(self.base_dir(digest), ignore_errors=True)
        work.rename(self.base_dir(digest))
        self._disk_bytes = None

    def touch(self, digest: str) -> None:
        """Mark the image used now (least recently used images are evicted first)."""
        now = time.time()
        os.utime(self.base_dir(digest), (now, now))

    # -- the cache -----------------------------------------------------------------
    def cached_digests(self) -> list[str]:
        return [f"sha256:{base.name}" for base in self.bases.iterdir()
                if (base / "image.json").exists() and not base.name.endswith(".unpacking")]

    def cached(self) -> list[CachedImage]:
        """Complete images, most recently used first."""
        images = []
        for base in self.bases.iterdir():
            if base.name.endswith(".unpacking") or not (base / "image.json").exists():
                continue
            digest = f"sha256:{base.name}"
            images.append(CachedImage(digest, self._size(digest), base.stat().st_mtime))
        return sorted(images, key=lambda image: image.last_used, reverse=True)

    def _size(self, digest: str) -> int:
        total = sum(f.stat().st_size for f in self.base_dir(digest).rglob("*")
                    if f.is_file() and not f.is_symlink())
        if self.verified(digest):
            manifest = parse_manifest(self.blob_path(digest).read_bytes())
            total += manifest.config.size + sum(layer.size for layer in manifest.layers)
        return total

    def disk_bytes(self) -> int:
        if self._disk_bytes is None:
            self._disk_bytes = sum(f.stat().st_size for f in self.root.rglob("*")
                                   if f.is_file() and not f.is_symlink())
        return self._disk_bytes

    def disk_gb(self) -> int:
        return -(-self.disk_bytes() // (1 << 30))

    def remove(self, digest: str) -> None:
        """Drop an image's base and blobs (the caller checked no machine uses it)."""
        self._disk_bytes = None
        shared: set[str] = set()  # blobs another held image needs too (a common base layer)
        for other in self.cached_digests():
            if other != digest and self.verified(other):
                shared.update(needed_blobs(parse_manifest(self.blob_path(other).read_bytes())))
        blob = self.blob_path(digest)
        if blob.exists():
            for needed in needed_blobs(parse_manifest(blob.read_bytes())):
                if needed not in shared:
                    self.blob_path(needed).unlink(missing_ok=True)
            blob.unlink(missing_ok=True)
        shutil.rmtree(self.base_dir(digest), ignore_errors=True)
        for ref_file in self.refs.glob("*.json"):
            try:
                if json.loads(ref_file.read_text()).get("digest") == digest:
                    ref_file.unlink(missing_ok=True)
            except (OSError, ValueError):
                continue
