"""On a hybrid cgroup host, a crun worker gives the v2 hierarchy's controllers v1 hierarchies
of their own, so crun runs as itself, with no mount namespace per command."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from bodega.worker.drivers.oci.core import runtimes
from bodega.worker.host.image_drivers import (
    CGROUP_ROOT,
    give_controllers_to_v1,
    unified_controllers,
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("crun") is None or unified_controllers() is None
    or not (CGROUP_ROOT / "memory").is_dir(),
    reason="needs root, crun, and a hybrid cgroup host (v1 hierarchies and v2 beside them)")


def test_the_v2_hierarchy_keeps_no_controller_and_crun_runs_without_a_namespace() -> None:
    held = (unified_controllers() or "").split()
    left = give_controllers_to_v1(runtimes.to_mount("crun", " ".join(held)))
    assert left is not None
    assert left.split() == []
    for name in held:  # each now a v1 hierarchy of its own (this run moved it)
        assert os.path.ismount(CGROUP_ROOT / name)
        assert Path("/proc/self/cgroup").read_text().count(f":{name}:") == 1
    assert runtimes.command("crun", left) == ("crun",)
    assert give_controllers_to_v1([]) == left  # a second worker finds it done


def test_a_controller_the_kernel_will_not_mount_is_logged_and_left_as_it_was(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    before = unified_controllers()
    with caplog.at_level(logging.WARNING, logger="bodega.worker.images"):
        assert give_controllers_to_v1(["no-such-controller"], root=tmp_path) == before
    assert not (tmp_path / "no-such-controller").exists()  # nothing left behind
    assert "crun will run in a mount namespace" in caplog.text
