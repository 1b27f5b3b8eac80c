"""The pure parts of images: references, the pull plan, eviction, bundles, whiteouts."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from bodega.model.machine import names_registry
from bodega.worker.drivers.oci.core.bundle import BundleError, MachineCommand, command, parse_user
from bodega.worker.images.core.eviction import CachedImage, to_evict
from bodega.worker.images.core.manifest import BadImage, ImageConfig, Manifest, pick_platform
from bodega.worker.images.core.plan import (
    Done,
    FetchBlob,
    FetchManifest,
    PullView,
    Resolve,
    Unpack,
    next_step,
)
from bodega.worker.images.core.reference import BadReference, parse_reference
from bodega.worker.images.unpack import apply_layer

D = "sha256:" + "a" * 64
C = "sha256:" + "c" * 64
L = "sha256:" + "1" * 64


def test_references_name_a_registry_or_are_labels() -> None:
    assert names_registry("127.0.0.1:5000/app:v1")
    assert names_registry("registry.example/team/app")
    assert not names_registry("process")
    assert not names_registry("library/nginx")
    ref = parse_reference("127.0.0.1:5000/team/app:v1")
    assert (ref.registry, ref.repository, ref.tag) == ("127.0.0.1:5000", "team/app", "v1")
    assert parse_reference("app", "reg:5000").version == "latest"
    assert parse_reference(f"reg.io/app@{D}").version == D
    for bad in ("", "Reg.io/UPPER", f"reg.io/app@sha256:{'z' * 64}"):
        with pytest.raises(BadReference):
            parse_reference(bad)
    with pytest.raises(BadReference):
        parse_reference("app")  # no registry and no default


def manifest() -> Manifest:
    return Manifest.model_validate({"config": {"digest": C, "size": 2},
                                    "layers": [{"digest": L, "size": 3}]})


def test_the_pull_plan_resumes_from_what_the_store_holds() -> None:
    assert next_step(PullView(None, None, frozenset(), False)) == Resolve()
    assert next_step(PullView(D, None, frozenset(), False)) == FetchManifest(D)
    step = next_step(PullView(D, manifest(), frozenset(), False))
    assert isinstance(step, FetchBlob)
    assert step.descriptor.digest == C
    step = next_step(PullView(D, manifest(), frozenset({C}), False))
    assert isinstance(step, FetchBlob)
    assert step.descriptor.digest == L
    assert next_step(PullView(D, manifest(), frozenset({C, L}), False)) == Unpack(D, manifest())
    assert next_step(PullView(D, None, frozenset(), True)) == Done(D)


def test_an_index_picks_linux_amd64() -> None:
    index = (b'{"manifests": [{"digest": "%s", "size": 1, "platform": {"os": "linux", '
             b'"architecture": "arm64"}}, {"digest": "%s", "size": 1, "platform": '
             b'{"os": "linux", "architecture": "amd64"}}]}') % (C.encode(), D.encode())
    assert pick_platform(index).digest == D
    with pytest.raises(BadImage):
        pick_platform(b'{"manifests": []}')


def test_eviction_drops_least_recently_used_unused_images_until_under_budget() -> None:
    cached = [CachedImage("a", 10, 1.0), CachedImage("b", 10, 2.0), CachedImage("c", 10, 3.0)]
    assert to_evict(cached, set(), 30) == []
    assert to_evict(cached, set(), 20) == ["a"]
    assert to_evict(cached, {"a"}, 20) == ["b"]
    assert to_evict(cached, {"a", "b", "c"}, 0) == []


def test_the_machine_config_overrides_the_image_command() -> None:
    image = ImageConfig.model_validate({"config": {"Entrypoint": ["/e"], "Cmd": ["c"]}})
    assert command(image, MachineCommand([], None, None)) == ["/e", "c"]
    assert command(image, MachineCommand(["/x"], None, None)) == ["/x"]
    assert command(image, MachineCommand(["/n"], ["/n"], None)) == ["/n"]
    assert command(image, MachineCommand(["/e", "d"], None, ["d"])) == ["/e", "d"]
    with pytest.raises(BundleError):
        command(ImageConfig(), MachineCommand([], None, None))
    passwd = "root:x:0:0::/:/bin/sh\nweb:x:33:34::/:/bin/sh\n"
    assert parse_user("web", passwd, "") == (33, 34)
    assert parse_user("7:8", "", "") == (7, 8)
    with pytest.raises(BundleError):
        parse_user("nobody", passwd, "")


def layer(path: Path, entries: dict[str, bytes | None]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in entries.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def test_layers_apply_with_whiteouts_and_never_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    apply_layer(layer(tmp_path / "1.tar", {"a": None, "a/x": b"1", "a/y": b"2", "b": b"3",
                                           "c": None, "c/z": b"4"}), root)
    apply_layer(layer(tmp_path / "2.tar", {"a/.wh.x": b"", "c/.wh..wh..opq": b"",
                                           "c/new": b"5"}), root)
    assert sorted(p.name for p in (root / "a").iterdir()) == ["y"]
    assert sorted(p.name for p in (root / "c").iterdir()) == ["new"]
    with pytest.raises(BadImage):
        apply_layer(layer(tmp_path / "3.tar", {"../escape": b"x"}), root)
    (root / "link").symlink_to("/etc")
    with pytest.raises(BadImage):
        apply_layer(layer(tmp_path / "4.tar", {"link/passwd": b"x"}), root)
    assert not (tmp_path / "escape").exists()
