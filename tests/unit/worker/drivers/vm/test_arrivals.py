"""A live move's marks on disk: the target's staged arrival, and the source's sockets set
aside so that the target's qemu may bind their names on a host both workers share."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.worker.drivers.vm import arrivals
from bodega.worker.drivers.vm.arrivals import Arrival


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """qemu's socket directory, here: plain files stand for the sockets."""
    directory = tmp_path / "run"
    directory.mkdir()
    for name, suffix in (("qmp_socket", "qmp"), ("control_socket", "ctl"),
                         ("exec_socket", "exec"), ("console_socket", "tty")):
        monkeypatch.setattr(arrivals, name,
                            lambda machine_id, s=suffix: directory / f"{machine_id}.{s}")
    return directory


def test_a_staged_arrival_reads_back_until_cleared(tmp_path: Path) -> None:
    machine_dir = tmp_path / "m1"
    assert arrivals.arrival_of(machine_dir) is None
    staged = Arrival(move_id="mv1", mac="02:00:00:00:00:01", disk_bytes=1 << 30)
    arrivals.stage_arrival(machine_dir, staged)
    assert arrivals.arrival_of(machine_dir) == staged
    arrivals.clear_arrival(machine_dir)
    assert arrivals.arrival_of(machine_dir) is None
    (machine_dir / "vm" / arrivals.ARRIVAL).write_text("{torn")  # unreadable: none
    assert arrivals.arrival_of(machine_dir) is None


def test_the_sources_sockets_go_aside_once_and_come_back(control: Path,
                                                         tmp_path: Path) -> None:
    machine_dir = tmp_path / "m1"
    (machine_dir / "vm").mkdir(parents=True)
    for suffix in ("qmp", "ctl", "exec"):  # no console: booted before consoles
        (control / f"m1.{suffix}").write_text("source")
    assert arrivals.leaving_qmp("m1", machine_dir) == control / "m1.qmp"
    arrivals.set_aside("m1", machine_dir)
    assert sorted(p.name for p in control.iterdir()) == [
        "m1.ctl.leaving", "m1.exec.leaving", "m1.qmp.leaving"]
    assert arrivals.leaving_qmp("m1", machine_dir) == control / "m1.qmp.leaving"
    # The target's qemu binds the names now: a second try of the handoff leaves them.
    (control / "m1.qmp").write_text("target")
    arrivals.set_aside("m1", machine_dir)
    assert (control / "m1.qmp").read_text() == "target"
    assert (control / "m1.qmp.leaving").read_text() == "source"
    # Refused: the VM runs on here, its sockets where they were.
    (control / "m1.qmp").unlink()
    arrivals.put_back("m1", machine_dir)
    assert sorted(p.name for p in control.iterdir()) == ["m1.ctl", "m1.exec", "m1.qmp"]
    assert not arrivals.is_set_aside(machine_dir)
