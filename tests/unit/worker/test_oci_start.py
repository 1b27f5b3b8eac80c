"""The oci driver's start path: the bundle joins the machine's netns, a cached image needs
no pull."""

from __future__ import annotations

from pathlib import Path

from bodega.worker.drivers.oci.core.bundle import MachineCommand, MemoryLimits, runtime_spec
from bodega.worker.drivers.oci.driver import OciDriver
from bodega.worker.images.core.manifest import ImageConfig
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

IMAGE = ImageConfig.model_validate({"config": {"Cmd": ["/bin/httpd"]}})
DIGEST = "sha256:" + "ab" * 32


def spec(netns: str | None) -> dict[str, object]:
    return runtime_spec(IMAGE, MachineCommand([], None, None), env={}, rootfs="/r",
                        hostname="m", cgroups_path=None, user=(0, 0), binds=[], netns=netns)


def test_the_runtime_joins_the_machines_network_namespace_by_path() -> None:
    joined = spec("/run/netns/m1")["linux"]
    assert {"type": "network", "path": "/run/netns/m1"} in joined["namespaces"]  # type: ignore[index]
    shared = spec(None)["linux"]
    assert all(ns["type"] != "network" for ns in shared["namespaces"])  # type: ignore[index]


def test_the_bundle_says_the_machines_memory_and_memory_plus_swap_for_its_cgroup() -> None:
    def resources(memory: MemoryLimits | None, cgroups: str | None = "/bodega/w/m1") -> object:
        linux = runtime_spec(IMAGE, MachineCommand([], None, None), env={}, rootfs="/r",
                             hostname="m", cgroups_path=cgroups, user=(0, 0), binds=[],
                             memory=memory)["linux"]
        return linux.get("resources")

    mib = 1 << 20
    assert resources(MemoryLimits(256)) == {"memory": {"limit": 256 * mib,
                                                       "swap": 256 * mib}}  # no swap
    assert resources(MemoryLimits(256, 512)) == {"memory": {"limit": 256 * mib,
                                                            "swap": 768 * mib}}
    # No cgroup of its own (a worker without cgroups): nothing for the runtime to limit.
    assert resources(MemoryLimits(256, 512), cgroups=None) is None
    assert resources(None) is None


def test_a_complete_cached_image_is_found_without_a_pull(tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    puller = Puller(store, RegistryClient(), default_registry="127.0.0.1:1")
    driver = OciDriver(None, puller, tmp_path / "machines", tmp_path / "state")
    image = "127.0.0.1:1/team/web:v1"
    assert driver.cached(image) is None  # never resolved
    store.record_ref(puller.reference(image), DIGEST, image)
    assert driver.cached(image) is None  # resolved, but no complete base yet
    store.rootfs(DIGEST).mkdir(parents=True)
    assert driver.cached(image) is None  # unpacking: no image.json yet
    (store.base_dir(DIGEST) / "image.json").write_text(IMAGE.model_dump_json(by_alias=True))
    assert driver.cached(image) == DIGEST
    assert driver.cached("not a reference!") is None
