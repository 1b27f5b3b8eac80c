"""`bodega clean --legacy`: what versions before cluster ids left, gone; what is in use, kept.

Objects named the old way (``bodega-<b>-<c>-<i>`` namespaces, ``bv<b>-<c>-<i>`` veths on
a ``bdg-<b>-<c>`` bridge, markers, a ``bodega/<worker>`` cgroup scope) are made by hand:
one set nothing uses, one with a process in its namespace and its cgroup. The CLI's dry
run lists the first set and not the second (nor a namespace carrying a cluster id); the
removal runs the same sweep limited to this test's names, so other runs' objects on the
host stay as they are.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bodega.cluster import cleanup
from bodega.runtime import cluster_id
from bodega.worker.host.core.names import HostNames
from bodega.worker.host.netns import NetnsNetwork
from bodega.worker.host.network import run
from tests.cidr_kit import held_octet

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and cgroups need root")

B = held_octet("leftovers-0", 20, 56)  # this process's range (see test_kernel_leftovers.py)
IDLE, BUSY = 200 + os.getpid() % 25, 225 + os.getpid() % 25
MEMORY = Path("/sys/fs/cgroup/memory/bodega")
MARKERS = Path("/run/bodega/netns")


def old_names(c: int) -> tuple[str, list[str], list[str]]:
    """An older version's bridge, namespaces and veths for 10.<B>.<c>.0/24."""
    return (f"bdg-{B}-{c}", [f"bodega-{B}-{c}-{i}" for i in (2, 3)],
            [f"bv{B}-{c}-{i}" for i in (2, 3)])


async def wire_old(c: int) -> None:
    bridge, namespaces, veths = old_names(c)
    await run("ip", "link", "add", bridge, "type", "bridge")
    for namespace, veth in zip(namespaces, veths, strict=True):
        await run("ip", "netns", "add", namespace)
        await run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
                  namespace)
        await run("ip", "link", "set", veth, "master", bridge, "up")
        MARKERS.mkdir(parents=True, exist_ok=True)
        (MARKERS / namespace).touch()


@pytest.fixture
async def old_objects() -> AsyncIterator[subprocess.Popen[bytes]]:
    """Both sets, and the process that keeps the busy one in use; all gone afterwards."""
    await wire_old(IDLE)
    await wire_old(BUSY)
    (MEMORY / f"kold{os.getpid()}" / "m1").mkdir(parents=True)
    (MEMORY / f"kbusy{os.getpid()}" / "m1").mkdir(parents=True)
    sleeper = subprocess.Popen(["ip", "netns", "exec", old_names(BUSY)[1][0], "sleep", "600"])
    (MEMORY / f"kbusy{os.getpid()}" / "m1" / "cgroup.procs").write_text(f"{sleeper.pid}\n")
    try:
        yield sleeper
    finally:
        sleeper.kill()
        sleeper.wait()
        for c in (IDLE, BUSY):
            bridge, namespaces, veths = old_names(c)
            for name in [*veths, bridge]:
                await run("ip", "link", "del", name, check=False)
            for namespace in namespaces:
                await run("ip", "netns", "del", namespace, check=False)
                (MARKERS / namespace).unlink(missing_ok=True)
        for scope in (f"kold{os.getpid()}", f"kbusy{os.getpid()}"):
            for path in (MEMORY / scope / "m1", MEMORY / scope):
                with contextlib.suppress(OSError):
                    path.rmdir()


def ours(name: str) -> bool:
    """This test's objects, by name (the last part of a path)."""
    made = {f"kold{os.getpid()}", f"kbusy{os.getpid()}"}
    for c in (IDLE, BUSY):
        bridge, namespaces, veths = old_names(c)
        made |= {bridge, *namespaces, *veths}
    return Path(name).name in made


async def test_legacy_leftovers_nothing_uses_go_and_those_in_use_stay(
        old_objects: subprocess.Popen[bytes]) -> None:
    names = HostNames(cluster_id.new())
    current = NetnsNetwork(ipaddress.ip_network(f"10.{B}.{IDLE}.0/24"), names)
    await current.setup()
    await current.prewarm([2])
    try:
        listed = subprocess.run([sys.executable, "-m", "bodega", "clean", "--legacy",
                                 "--dry-run"], capture_output=True, text=True, timeout=60,
                                check=True).stdout.splitlines()
        idle_bridge, idle_namespaces, idle_veths = old_names(IDLE)
        busy_bridge, (busy, unused), (_busy_veth, unused_veth) = old_names(BUSY)
        # The busy bridge's other namespace is unused: it goes, and the bridge, still with a
        # port in use, stays.
        gone = [*idle_namespaces, unused]
        expected = ([f"would remove network namespace {n}" for n in gone]
                    + [f"would remove veth {v}" for v in [*idle_veths, unused_veth]]
                    + [f"would remove bridge {idle_bridge}"]
                    + [f"would remove netns marker {MARKERS / n}" for n in gone]
                    + [f"would remove cgroup {MEMORY / f'kold{os.getpid()}'}"])
        assert [line for line in listed if ours(line.split()[-1])] == expected
        assert not [line for line in listed if names.cluster_id in line]
        assert (Path("/run/netns") / idle_namespaces[0]).exists()  # a dry run removes nothing

        report = await cleanup.sweep_legacy(only=ours)
        assert report.problems == ()
        assert [f"would remove {line}" for line in report.objects] == expected
        for namespace in gone:
            assert not (Path("/run/netns") / namespace).exists()
            assert not (MARKERS / namespace).exists()
        for link in [idle_bridge, *idle_veths, unused_veth]:
            assert not Path(f"/sys/class/net/{link}").exists()
        assert not (MEMORY / f"kold{os.getpid()}").exists()
        # In use: kept, and its process left alone.
        assert (Path("/run/netns") / busy).exists()
        assert Path(f"/sys/class/net/{busy_bridge}").exists()
        assert (MEMORY / f"kbusy{os.getpid()}" / "m1").exists()
        assert old_objects.poll() is None
        # A namespace carrying a cluster id is never an older version's.
        assert current.ready(2)
    finally:
        await current.teardown()
        with contextlib.suppress(ProcessLookupError):
            os.kill(old_objects.pid, signal.SIGKILL)
