"""What ``bodega volumes`` shows of a volume and its snapshots, and the sizes it reads."""

from __future__ import annotations

import pytest

from bodega.cli.commands.volumes import (
    in_bytes,
    restart_line,
    snapshot_rows,
    target_size,
    volume_lines,
    volume_rows,
)
from bodega.model.volume import ExtendVolumeAnswer, Volume, VolumeSnapshot

VOLUME = Volume(id="vol_1", name="data", state="created", size_gb=3, region="ams",
                zone="ams-1", encrypted=True, created_at="2026-11-28T09:00:00Z",
                snapshot_retention=5, auto_backup_enabled=True, host_status="ok")


def test_a_row_a_volume_as_flyctl_orders_its_columns() -> None:
    attached = VOLUME.model_copy(update={"id": "vol_2", "attached_machine_id": "m1",
                                         "encrypted": False})
    assert volume_rows([VOLUME, attached]) == [
        ("vol_1", "created", "data", "3GB", "ams", "ams-1", "true", "",
         "2026-11-28T09:00:00Z"),
        ("vol_2", "created", "data", "3GB", "ams", "ams-1", "false", "m1",
         "2026-11-28T09:00:00Z")]


def test_a_volume_on_an_unreachable_host_is_marked() -> None:
    for status, shown in (("unreachable", "vol_1*"), ("unknown", "vol_1"), (None, "vol_1")):
        (row,) = volume_rows([VOLUME.model_copy(update={"host_status": status})])
        assert row[0] == shown


def test_show_prints_a_field_a_line() -> None:
    assert volume_lines(VOLUME.model_copy(update={"attached_machine_id": "m1"}), "web") == [
        "ID:                  vol_1",
        "Name:                data",
        "App:                 web",
        "State:               created",
        "Region:              ams",
        "Zone:                ams-1",
        "Size GB:             3",
        "Encrypted:           true",
        "Attached VM:         m1",
        "Created at:          2026-11-28T09:00:00Z",
        "Snapshot retention:  5 days",
        "Scheduled snapshots: true",
        "Host status:         ok"]
    bare = volume_lines(Volume(id="vol_1"), "web")
    assert "Attached VM:" in bare  # an empty field leaves no trailing space
    assert not any(line.startswith("Host status") for line in bare)


@pytest.mark.parametrize(("given", "current", "wanted"), [
    ("10", None, 10), ("10GB", None, 10), ("10g", 3, 10), (" 7 ", None, 7),
    ("+2", 3, 5), ("+2gb", 10, 12)])
def test_a_size_is_a_number_of_gb_or_more_than_now(given: str, current: int | None,
                                                   wanted: int) -> None:
    assert target_size(given, current) == wanted


@pytest.mark.parametrize("given", ["", "0", "+0", "-1", "1.5", "big", "10MB", "++1"])
def test_a_size_that_is_not_whole_gb_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="--size takes a whole number of GB"):
        target_size(given, 3)


def test_growing_by_some_needs_the_size_now() -> None:
    with pytest.raises(ValueError, match="current size"):
        target_size("+1")


def test_the_restart_line_names_the_machine_to_restart() -> None:
    mounted = VOLUME.model_copy(update={"attached_machine_id": "m1"})
    assert restart_line(ExtendVolumeAnswer(volume=mounted, needs_restart=True), "web") == (
        "Machine m1 mounts this volume: restart it (`bodega machine restart m1 -a web`) for "
        "its file system to see the new size")
    assert restart_line(ExtendVolumeAnswer(volume=VOLUME, needs_restart=True), "web") == (
        "The machine mounting this volume needs a restart to see the new size")
    assert restart_line(ExtendVolumeAnswer(volume=mounted, needs_restart=False), "web") == (
        "No machine needs a restart: the new size is there now")


@pytest.mark.parametrize(("count", "shown"), [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (10 * 1024, "10 KiB"),
    (300_000, "293 KiB"), (5 * 1024 ** 3, "5.0 GiB"), (20 * 1024 ** 4, "20 TiB")])
def test_sizes_read_in_powers_of_1024(count: int, shown: str) -> None:
    assert in_bytes(count) == shown


def test_a_row_a_snapshot() -> None:
    taken = VolumeSnapshot(id="vs_1", created_at="2026-11-28T09:00:00Z", size=2048,
                           status="created", volume_size=3, retention_days=5,
                           holders=["ams-1", "ams-2"], off_host=True)
    alone = VolumeSnapshot(id="vs_2", created_at="2026-11-28T10:00:00Z", size=0,
                           status="created", volume_size=1, retention_days=5,
                           holders=["ams-1"], off_host=False)
    pending = VolumeSnapshot(status="creating", volume_size=1, retention_days=5)
    assert snapshot_rows([taken, alone, pending]) == [
        ("vs_1", "created", "2.0 KiB", "3.0 GiB", "2026-11-28T09:00:00Z", "5", "ams-1,ams-2"),
        ("vs_2", "created", "0 B", "1.0 GiB", "2026-11-28T10:00:00Z", "5",
         "ams-1 (local only)"),
        ("(pending)", "creating", "0 B", "1.0 GiB", "", "5", "")]
