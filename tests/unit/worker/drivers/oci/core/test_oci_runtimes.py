"""Which OCI runtime runs image machines, and how it is run on a hybrid cgroup host."""

from __future__ import annotations

import pytest

from bodega.worker.drivers.oci.core.runtimes import UNIFIED, command, pick, to_mount


def test_auto_is_crun_where_installed_and_runc_elsewhere() -> None:
    assert pick("auto", lambda program: program == "crun") == "crun"
    assert pick("auto", lambda _program: False) == "runc"
    assert pick("runc", lambda _program: True) == "runc"  # named: taken as named
    with pytest.raises(ValueError, match="use auto, runc or crun"):
        pick("youki", lambda _program: True)


def test_crun_runs_without_the_v2_hierarchy_only_where_it_has_controllers() -> None:
    hybrid = command("crun", "hugetlb\n")
    assert hybrid[:5] == ("unshare", "--mount", "--propagation", "slave", "--")
    assert hybrid[-1] == "crun"
    assert f"umount {UNIFIED}" in hybrid[-3]
    assert command("/usr/bin/crun", "hugetlb\n")[-1] == "/usr/bin/crun"
    assert command("crun", "\n") == ("crun",)  # an empty v2 hierarchy: crun takes the host
    assert command("crun", None) == ("crun",)  # no v2 hierarchy beside v1 (or v2 alone)
    assert command("runc", "hugetlb\n") == ("runc",)  # runc takes a hybrid host as it is


def test_only_crun_asks_for_the_v2_hierarchys_controllers_to_be_mounted_as_v1() -> None:
    assert to_mount("crun", "hugetlb\n") == ["hugetlb"]
    assert to_mount("/usr/bin/crun", "hugetlb misc\n") == ["hugetlb", "misc"]
    assert to_mount("crun", "\n") == []  # v2 holds none: nothing to do
    assert to_mount("crun", None) == []  # no v2 hierarchy beside v1
    assert to_mount("runc", "hugetlb\n") == []  # the host is not changed for runc
