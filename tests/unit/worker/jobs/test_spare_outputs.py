"""A slot's empty output files are used again (``worker/jobs/spare_outputs.py``): a run's
file that stayed empty becomes a later run's once it has waited ``SPARE_AFTER``, the same
file (no new one made); one written meanwhile by what its task left behind is kept as that
task's output, never lent; a slot holds ``SPARES_HELD`` at most."""

from __future__ import annotations

from pathlib import Path

from bodega.worker.jobs.spare_outputs import SPARE_AFTER, SPARES_HELD, Spare, SpareOutputs


class Late:
    def __init__(self) -> None:
        self.kept: list[tuple[str, int, bytes]] = []

    def __call__(self, job_id: str, task: int, output: Path) -> None:
        self.kept.append((job_id, task, output.read_bytes()))
        output.unlink()  # moved into place, as the kept output does


def ran(out: Path, seq: int, at: float, job: str = "job") -> Spare:
    """Run ``seq`` ended at ``at`` having printed nothing: its file is left."""
    path = out / f"{seq}.log"
    path.write_bytes(b"")
    return Spare(path, job, seq, at)


def test_a_spare_is_lent_once_it_has_waited_and_is_the_same_file(tmp_path: Path) -> None:
    spares, late = SpareOutputs(), Late()
    first = ran(tmp_path, 1, 100.0)
    inode = first.path.stat().st_ino
    spares.left(first, late)
    assert not spares.lend(tmp_path / "2.log", 100.0 + SPARE_AFTER / 2, late)  # too soon
    assert not (tmp_path / "2.log").exists()
    assert spares.lend(tmp_path / "3.log", 100.0 + SPARE_AFTER, late)
    assert (tmp_path / "3.log").stat().st_ino == inode
    assert not first.path.exists()
    assert len(spares) == 0
    assert not spares.lend(tmp_path / "4.log", 200.0, late)  # none left: the shell makes one
    assert late.kept == []


def test_a_spare_written_after_its_run_is_kept_as_its_output_not_lent(tmp_path: Path) -> None:
    spares, late = SpareOutputs(), Late()
    written, quiet = ran(tmp_path, 1, 100.0, job="noisy"), ran(tmp_path, 2, 100.5)
    spares.left(written, late)
    spares.left(quiet, late)
    written.path.write_bytes(b"from a process its task left behind\n")
    assert spares.lend(tmp_path / "3.log", 102.0, late)
    assert late.kept == [("noisy", 1, b"from a process its task left behind\n")]
    assert (tmp_path / "3.log").read_bytes() == b""  # the quiet one's file


def test_a_slot_holds_so_many_spares_and_the_oldest_goes(tmp_path: Path) -> None:
    spares, late = SpareOutputs(), Late()
    for seq in range(SPARES_HELD):
        spares.left(ran(tmp_path, seq, 100.0), late)
    (tmp_path / "0.log").write_bytes(b"late\n")
    spares.left(ran(tmp_path, SPARES_HELD, 100.0), late)
    spares.left(ran(tmp_path, SPARES_HELD + 1, 100.0), late)
    assert len(spares) == SPARES_HELD
    assert late.kept == [("job", 0, b"late\n")]  # written: kept; empty: removed
    assert not (tmp_path / "1.log").exists()
    assert len(list(tmp_path.iterdir())) == SPARES_HELD


def test_a_spare_gone_with_its_slots_directory_is_passed_over(tmp_path: Path) -> None:
    spares, late = SpareOutputs(), Late()
    gone, there = ran(tmp_path, 1, 100.0), ran(tmp_path, 2, 100.0)
    spares.left(gone, late)
    spares.left(there, late)
    gone.path.unlink()
    assert spares.lend(tmp_path / "3.log", 200.0, late)
    assert (tmp_path / "3.log").exists()
    assert not there.path.exists()
