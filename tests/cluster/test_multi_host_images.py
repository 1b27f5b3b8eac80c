"""Image apps on three hosts joined with the CLI (docs/multi-host.md, "Images across hosts").

Host 1 runs ``bodega up --advertise`` with its image registry; hosts 2 and 3
run the join line it printed. Each host keeps one mount namespace and sees
the cgroup hierarchies, as a real host does, so its workers run images in
every isolation the host offers. From the test's own host (another address
on the network), ``bodega deploy`` builds examples/image-app with buildah
and pushes it to host 1's registry, with no flag: over TLS checked against
the CA the cluster names, the admin token as its password. Once per
isolation (container, sandbox with runsc, vm with qemu), as three apps
deployed at once; ``bodega scale`` then puts one machine of each on every
host, whose worker pulls the image from host 1's registry over TLS with its
own certificate; and every machine answers through every host's proxy. An
isolation whose tools are installed must be offered by every host; one whose
tools are not is skipped, naming what is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.cluster.joined import PROXY_PORT
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.cluster.deploy_kit import EXAMPLES, readable_dir
from tests.cluster.multihost_kit import MultiHost, three_hosts, until, wait_for
from tests.integration.images.image_kit import BUSYBOX, needs_image_tools
from tests.ports_kit import free_port

pytestmark = [
    needs_image_tools,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah"),
]

REGIONS = {1: "ams", 2: "syd", 3: "lon"}
# What each isolation needs installed on a host (docs/isolation.md, scripts/host-packages),
# by what is missing without it: a host with them all offers the isolation once its probe
# ran there, and a test with one missing says so in its skip.
KERNEL = f"a cloud kernel in {DEFAULT_KERNEL_DIR} (scripts/host-packages unpacks one)"
NEEDS = {"container": {},
         "sandbox": {"runsc (package runsc)": shutil.which("runsc") is not None},
         "vm": {"qemu-system-x86_64 (package qemu-system-x86)":
                shutil.which("qemu-system-x86_64") is not None,
                KERNEL: any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*"))}}
MISSING = {isolation: [what for what, here in needs.items() if not here]
           for isolation, needs in NEEDS.items()}
ISOLATIONS = [isolation for isolation, missing in MISSING.items() if not missing]


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    # WireGuard ports of their own: 51820 may be another cluster's on this machine.
    with readable_dir() as root, three_hosts(
            root, "--registry-port", str(free_port()), "--driver", "auto",
            "--wireguard-port", str(free_port()), keep_mounts=True, cgroups=True) as multi:
        joined = [multi.start(i, *multi.join_argv(REGIONS[i]), "--cpus", "4",
                              "--memory-mb", "2048", "--wireguard-port", str(free_port()))
                  for i in (2, 3)]
        for host in joined:
            wait_for(host, "bodega joined")
        until(lambda: sorted(w["region"] for w in multi.json("cluster", "workers")
                             if w["status"] == "alive") == ["ams", "lon", "syd"],
              "a worker alive on each of the three hosts")
        yield multi


def image_app(root: Path, app: str, isolation: str) -> Path:
    """examples/image-app as app ``app``, serving a page naming it, run in ``isolation``."""
    target = root / app
    shutil.copytree(EXAMPLES / "image-app", target)
    shutil.copy(BUSYBOX, target / "busybox")
    (target / "www" / "index.html").write_text(page(app))
    toml = target / "bodega.toml"
    text = toml.read_text().replace('app = "image-app"', f'app = "{app}"', 1)
    if isolation != "container":
        text += f'\n[[vm]]\n  isolation = "{isolation}"\n'
    toml.write_text(text)
    return toml


def page(app: str) -> str:
    return f"{app}, built on the test's host and pulled from host 1\n"


def registry(cluster: MultiHost) -> str:
    """host:port of host 1's image registry, as its ``cluster.json`` lists it."""
    return str(next(c["registry"] for c in cluster.members[0].components()
                    if c["role"] == "registry"))


def proxies(cluster: MultiHost) -> dict[int, str]:
    """Every host's proxy: host 1's on the port the kit chose, the joined hosts' on theirs."""
    return {1: cluster.proxy, **{i: f"http://{cluster.hosts.address(i)}:{PROXY_PORT}"
                                 for i in (2, 3)}}


def answers(proxy: str, app: str, machine: str) -> bool:
    try:
        got = httpx.get(proxy, timeout=10, headers={
            "host": f"{app}.localhost", "fly-force-instance-id": machine})
    except httpx.HTTPError:
        return False
    return got.status_code == 200 and got.text == page(app)


def spread(cluster: MultiHost, isolation: str) -> None:
    """Deploy the app in ``isolation``, one machine on every host, each served by every
    host's proxy; AssertionError naming what did not happen."""
    app = f"img-{isolation}"
    cluster.ok("deploy", "-c", str(image_app(cluster.root, app, isolation)))
    cluster.ok("scale", "count", "1", "--app", app, "--region", ",".join(REGIONS.values()))

    def one_per_host() -> list[dict[str, Any]] | None:
        machines = cluster.json("machine", "list", "--app", app)
        started = [m for m in machines if m["state"] == "started"]
        regions = sorted(m["region"] for m in started)
        return started if len(machines) == 3 and regions == sorted(REGIONS.values()) else None

    machines = until(one_per_host, f"{app}: one machine started on each host", timeout=240)
    images = {m["config"]["image"] for m in machines}
    assert len(images) == 1, images  # the one the deploy pushed, pinned by its digest
    (image,) = images
    assert image.startswith(f"{registry(cluster)}/{app}:v1@sha256:"), image
    for machine in machines:
        asked = (machine["config"].get("guest") or {}).get("isolation") or "container"
        assert asked == isolation, machine["config"]
        if isolation != "container":  # a kernel of its own: gVisor's, or the VM's
            kernel = cluster.ok("machine", "exec", machine["id"], "-a", app, "--",
                                "/bin/busybox", "cat", "/proc/version")
            assert kernel.startswith("Linux version"), kernel
            assert kernel.strip() != Path("/proc/version").read_text().strip(), machine["id"]
        for index, proxy in proxies(cluster).items():
            until(partial(answers, proxy, app, machine["id"]),
                  f"{app}: machine {machine['id']} ({machine['region']}) through host "
                  f"{index}'s proxy")


@pytest.mark.parametrize("isolation", [pytest.param(isolation, marks=pytest.mark.skipif(
    bool(missing), reason=f"{isolation} not covered: no {' and no '.join(missing)}"))
    for isolation, missing in MISSING.items()])
def test_every_host_offers_each_isolation_it_has_the_tools_for(
        cluster: MultiHost, isolation: str) -> None:
    """An isolation whose tools are installed and that a host does not offer fails here
    (its probe did not run there); one whose tools are missing is skipped by name, so a
    run that covered containers only says so."""
    offered = {w["region"]: w["totals"]["isolations"]
               for w in cluster.json("cluster", "workers")}
    assert sorted(offered) == sorted(REGIONS.values()), offered
    assert [region for region, mine in offered.items() if isolation not in mine] == [], \
        offered


def test_an_image_app_runs_on_every_host_in_every_isolation(cluster: MultiHost) -> None:
    offered = {w["region"]: set(w["totals"]["isolations"])
               for w in cluster.json("cluster", "workers")}
    assert all(set(ISOLATIONS) <= mine for mine in offered.values()), offered
    try:
        with ThreadPoolExecutor(len(ISOLATIONS)) as pool:
            runs = {isolation: pool.submit(spread, cluster, isolation)
                    for isolation in ISOLATIONS}
            failed = {}
            for isolation, run in runs.items():
                try:
                    run.result()
                except AssertionError as exc:
                    failed[isolation] = str(exc)
        assert failed == {}, failed
    finally:
        for isolation in ISOLATIONS:
            subprocess.run(["buildah", "rmi", "-f", f"{registry(cluster)}/img-{isolation}:v1"],
                           capture_output=True, check=False)


def test_the_registry_refuses_a_push_from_elsewhere_without_the_token(
        cluster: MultiHost) -> None:
    """Host 1's registry serves every host: from host 2, a push with no token, or with
    another, is refused; plain HTTP gets no answer."""
    ca = cluster.members[0].data / "ca.crt"
    probe = ("import sys, httpx\n"
             "url, ca = sys.argv[1], sys.argv[2]\n"
             "for auth in (None, ('x', 'not-the-token')):\n"
             "    r = httpx.post(url + '/v2/intruder/blobs/uploads/', verify=ca, auth=auth)\n"
             "    print(r.status_code)\n"
             "try:\n"
             "    httpx.get(url.replace('https', 'http') + '/v2/', timeout=5)\n"
             "    print('plain answered')\n"
             "except httpx.HTTPError:\n"
             "    print('plain refused')\n")
    done = subprocess.run(cluster.hosts.exec(2, sys.executable, "-c", probe,
                                             f"https://{registry(cluster)}", str(ca)),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.split() == ["401", "401", "plain", "refused"], done.stderr
