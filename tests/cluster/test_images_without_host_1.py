"""No special host for images: with host 1 lost, a host that lacks an app's image pulls it and
a deploy pushes a new one (docs/images.md, "Every server host a registry").

Namespace hosts joined with the CLI as a user types it: host 1 runs ``bodega
up --advertise`` with its image registry, host 2 joins as a server
(``--server``, a server token from host 1) and runs a registry of its own,
host 3 joins as a plain peer with the line host 1 printed. From the test's
own host, ``bodega deploy`` through host 1's API builds examples/image-app
with buildah and pushes it to every live registry, host 1's first (so the
machines' image names host 1's registry); its machine runs on host 2. Host 4
joins as a server after that push: its registry catches up with the others
(``cluster/registry_sync.py``) and holds the image by the same digest. Then
every process of host 1 is killed with SIGKILL, as a power cut would, and
through host 2's API:

- a machine of the app is created on host 3, which never held the image: its
  worker pulls it from host 2's registry, host 1's being gone, and it runs;
- a deploy of a new version pushes to the registries left (hosts 2 and 4) and
  both machines run the new image, host 3's pulled from another host's.

The time a pull takes with the first registry lost, beside one with it
present, is ``bench/machines/image_pull_failover.py``'s figure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import ssl
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.deploy_kit import EXAMPLES, readable_dir
from tests.cluster.multihost_kit import TOKEN, MultiHost, three_hosts, until, wait_for
from tests.integration.images.image_kit import BUSYBOX, needs_image_tools
from tests.ports_kit import free_port

pytestmark = [
    needs_image_tools,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah"),
]

APP = "img-everywhere"
SIZES = ("--driver", "auto", "--cpus", "4", "--memory-mb", "2048")


def page(version: str) -> str:
    return f"{APP} {version}\n"


def image_app(root: Path, version: str) -> Path:
    """examples/image-app as ``APP`` in syd (host 2), serving a page naming ``version``."""
    target = root / f"{APP}-{version}"
    shutil.copytree(EXAMPLES / "image-app", target)
    shutil.copy(BUSYBOX, target / "busybox")
    (target / "www" / "index.html").write_text(page(version))
    toml = target / "bodega.toml"
    toml.write_text(toml.read_text()
                    .replace('app = "image-app"', f'app = "{APP}"', 1)
                    .replace('primary_region = "ams"', 'primary_region = "syd"', 1))
    return toml


def via(multi: MultiHost, index: int) -> MultiHost:
    """The CLI pointed at host ``index``'s own Machines API (a joined host's default port)."""
    return dataclasses.replace(multi, api=f"http://{multi.hosts.address(index)}:4280")


def registries(multi: MultiHost) -> list[str]:
    """``GET /v1/cluster``'s live registries, as a client of ``multi``'s API reads them."""
    try:
        got = httpx.get(f"{multi.api}/v1/cluster", timeout=5,
                        headers={"authorization": f"Bearer {TOKEN}"})
    except httpx.HTTPError:
        return []
    return list(got.json().get("image_registries", [])) if got.status_code == 200 else []


def registry_of(host: Any) -> str:
    return str(next(c["registry"] for c in host.components() if c["role"] == "registry"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(
            root, "--registry-port", str(free_port()), "--driver", "auto",
            "--wireguard-port", str(free_port()), count=4, keep_mounts=True,
            cgroups=True) as multi:
        syd = join_server(multi, 2, "syd")
        lon = multi.start(3, *multi.join_argv("lon"), "--wireguard-port", str(free_port()),
                          *SIZES)
        for host in (syd, lon):
            wait_for(host, "bodega joined")
        until(lambda: sorted(w["region"] for w in multi.json("cluster", "workers")
                             if w["status"] == "alive") == ["ams", "lon", "syd"],
              "a worker alive on each of the three hosts")
        yield multi


def join_server(multi: MultiHost, index: int, region: str) -> Any:
    """Host ``index`` joins through host 1 as a server, with a registry of its own."""
    server_token = multi.ok("cluster", "token", "create", "--server",
                            "--description", f"host {index}").strip()
    return multi.start(index, "join", multi.join_argv(region)[1], "--token", server_token,
                       "--region", region, "--server", "--registry-port", str(free_port()),
                       "--wireguard-port", str(free_port()), *SIZES)


def tag_digest(multi: MultiHost, registry: str, tag: str) -> str | None:
    """The manifest digest ``APP:tag`` names in ``registry``, read with the admin token over
    TLS checked against the cluster CA, as a push reads it; None if it holds none."""
    try:
        got = httpx.head(f"https://{registry}/v2/{APP}/manifests/{tag}", timeout=10,
                         verify=ssl.create_default_context(
                             cafile=str(multi.members[0].data / "ca.crt")), auth=("x", TOKEN),
                         headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
    except httpx.HTTPError:
        return None
    return got.headers.get("docker-content-digest") if got.status_code == 200 else None


def running(multi: MultiHost, version: str, regions: set[str]) -> list[dict[str, Any]] | None:
    """The app's machines, if every one is started running the image of ``version`` (its
    tag), they are in ``regions`` (one at least in each), and each answers with its page
    through host 2's proxy."""
    machines = [m for m in multi.json("machine", "list", "--app", APP)
                if m["state"] != "destroyed"]
    if not machines or any(m["state"] != "started"
                           or f"/{APP}:{version}@" not in m["config"]["image"]
                           for m in machines):
        return None
    if {m["region"] for m in machines} != regions:
        return None
    proxy = f"http://{multi.hosts.address(2)}:8080"
    for machine in machines:
        try:
            got = httpx.get(proxy, timeout=10, headers={
                "host": f"{APP}.localhost", "fly-force-instance-id": machine["id"]})
        except httpx.HTTPError:
            return None
        if got.status_code != 200 or got.text != page(version):
            return None
    return machines


def test_with_host_1_lost_a_new_host_pulls_the_image_and_a_deploy_pushes_a_new_one(
        cluster: MultiHost) -> None:
    host1, host2, host3 = cluster.members[:3]
    mine, peers = registry_of(host1), registry_of(host2)
    assert mine != peers
    # Host 2's workers advertise its registry: a push through host 1 lands on both.
    until(lambda: registries(cluster) == [mine, peers], "both registries listed, host 1's first")
    assert registries(via(cluster, 2)) == [peers, mine]  # each broker its own host's first
    cluster.ok("deploy", "-c", str(image_app(cluster.root, "v1")))
    machine = until(partial(running, cluster, "v1", {"syd"}), "v1 started on host 2",
                    timeout=240)[0]
    assert machine["config"]["image"].startswith(f"{mine}/{APP}:v1@sha256:")
    pinned = machine["config"]["image"].rsplit("@", 1)[1]
    assert tag_digest(cluster, peers, "v1") == pinned  # the push landed on both

    # A server host joining after the push: its registry catches up, by the same digest.
    late = join_server(cluster, 4, "fra")
    wait_for(late, "bodega joined")
    latest = registry_of(late)
    until(lambda: tag_digest(cluster, latest, "v1") == pinned,
          "host 4's registry holding v1, caught up from the others")

    pids = subprocess.run(["ip", "netns", "pids", cluster.hosts.namespace(1)],
                          capture_output=True, text=True, check=True).stdout.split()
    for pid in pids:  # every process of host 1 at once, as a power cut would
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    two = via(cluster, 2)
    until(lambda: registries(two) == [peers, latest], "host 1's registry no longer listed")

    # Host 3 never held the image; its reference names host 1's registry, which is gone.
    listed = {r["registry"]: r for r in two.json("cluster", "registries")}
    assert listed[peers].get("push") == 1
    assert listed[peers]["regions"] == ["syd"]
    assert "push" not in listed[mine]  # its host lost: no push goes there
    assert listed[mine]["regions"] == ["ams"]
    two.ok("scale", "count", "1", "--app", APP, "--region", "lon")
    machines = until(partial(running, two, "v1", {"syd", "lon"}),
                     "v1 started on host 3 too, pulled without host 1", timeout=240)
    lon = next(m for m in machines if m["region"] == "lon")
    assert lon["config"]["image"] == machine["config"]["image"]
    assert "fetched sha256:" in _worker_log(host3)

    # A new version: pushed to the registries left (host 2's), run on both hosts.
    two.ok("deploy", "-c", str(image_app(cluster.root, "v2")))
    machines = until(partial(running, two, "v2", {"syd", "lon"}),
                     "v2 started on hosts 2 and 3", timeout=240)
    assert {m["config"]["image"].split("/", 1)[0] for m in machines} == {peers}
    v2 = machines[0]["config"]["image"].rsplit("@", 1)[1]
    assert tag_digest(cluster, latest, "v2") == v2  # pushed to every live registry
    subprocess.run(["buildah", "rmi", "-f", f"{mine}/{APP}:v1", f"{peers}/{APP}:v2"],
                   capture_output=True, check=False)


def _worker_log(host: Any) -> str:
    """Everything host ``host``'s workers logged."""
    return "".join(path.read_text(errors="replace")
                   for path in (host.data / "logs").glob("*.log"))
