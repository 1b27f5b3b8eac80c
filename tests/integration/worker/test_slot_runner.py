"""A warm slot's program, run for real (``sh -c RUNNER`` in a directory, as a slot machine
runs it, in a session of its own, stopped by a signal to its process group as the process
driver stops one): a line's argv reaches the program as given (no shell reading of it,
whatever the program's name), exit codes and signals come back as a machine's would, a run
number seen twice runs once, a stop reaches the task that runs (and ends an idle slot at
once), and an end is kept until a full disk lets it be written. Slots of the loops of
earlier versions, found after an upgrade, run the lines written in their forms."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bodega.jobs.slots import MAX_DEPTH, RUNNER, SEEN, dispatch_line, results, task_line
from bodega.model.machine_config import Guest, Init, MachineConfig

HOSTILE = "$HOME; touch pwned `id` \"'"  # an argument a shell's reading of would run


def task(argv: list[str], env: dict[str, str] | None = None) -> MachineConfig:
    return MachineConfig(image="process", init=Init(exec=argv), env=env,
                         guest=Guest(cpus=1, memory_mb=256))


# The loop of bodega's slots before they read their FIFO as their script (``loop_of``: 1): a
# slot found running after an upgrade runs it, and is given lines of ``task_line(1, ...)``.
EARLIER_RUNNER = r"""
cd "${BODEGA_SLOT_DIR:-.}" || exit 111
rm -f tasks done results
mkfifo -m 600 tasks done || exit 111
mkdir -p out || exit 111
exec 3<>tasks
set --
child= stopping=
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
: > ready
while [ -z "$stopping" ] && IFS= read -r line <&3; do
  run=${line%% *}
  case " $* " in *" $run "*) continue ;; esac
  set -- "$@" "$run"
  [ "$#" -le @SEEN@ ] || shift
  eval "${line#* }" 3<&- </dev/null >"out/$run.log" 2>&1 &
  child=$!
  wait "$child"; code=$?
  while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
  child=
  fmt='%s %s\n'
  until printf "$fmt" "$run" "$code" >> results 2>/dev/null; do
    fmt='\n%s %s\n'
    sleep 1
  done
  printf '%s\n' "$run" > done
done
""".replace("@SEEN@", str(SEEN))


# The loop after it (``loop_of``: 2), which ran each task in the background, forwarding a
# stop to it from a trap; given lines of ``task_line(2, ...)``.
BACKGROUND_RUNNER = r"""
cd "${BODEGA_SLOT_DIR:-.}" || exit 111
rm -f tasks done results
mkfifo -m 600 tasks done || exit 111
mkdir -p out || exit 111
exec 3<>tasks
seen=' ' held=0 run= child= stopping=
s() {
  case "$seen" in *" $1 "*) return 1 ;; esac
  seen="$seen$1 " held=$((held + 1)) run=$1
  [ "$held" -le @SEEN@ ] || seen=" ${seen# * }" held=$((held - 1))
  trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
}
e() {
  child=$!
  wait "$child"; code=$?
  while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
  child=
  fmt='%s %s\n'
  until printf "$fmt" "$run" "$code" >> results 2>/dev/null; do
    fmt='\n%s %s\n'
    sleep 1
  done
  printf '%s\n' "$run" > done
  [ -z "$stopping" ] || exit 0
  trap - TERM INT
}
: > ready
. ./tasks
""".replace("@SEEN@", str(SEEN))

@contextlib.contextmanager
def running_slot(where: Path, program: str = RUNNER,
                 ) -> Iterator[tuple[Path, subprocess.Popen[bytes], int]]:
    runner = subprocess.Popen(["/bin/sh", "-c", program, "bodega-slot"], cwd=where,
                              start_new_session=True)
    deadline = time.monotonic() + 10
    while not (where / "ready").exists():
        assert runner.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.01)
    done = os.open(where / "done", os.O_RDWR | os.O_NONBLOCK)
    tasks = os.open(where / "tasks", os.O_WRONLY | os.O_NONBLOCK)
    try:
        yield where, runner, tasks
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
        os.close(tasks)
        os.close(done)


@pytest.fixture
def slot(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes], int]]:
    with running_slot(tmp_path) as running:
        yield running


def ended(where: Path, count: int) -> list[tuple[int, int]]:
    deadline = time.monotonic() + 10
    while len(found := results((where / "results").read_text()
                               if (where / "results").exists() else "")) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.01)
    return found


def test_the_runner_runs_argv_as_given_with_the_task_s_env_and_reports_codes(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    where, _, tasks = slot
    os.write(tasks, dispatch_line(1, task(["/bin/sh", "-c", 'printf "%s|%s" "$1" "$T"; exit 3',
                                           "sh", HOSTILE], {"T": "a b'c"})))
    os.write(tasks, dispatch_line(2, task(["/no/such/program"])))
    assert ended(where, 2) == [(1, 3), (2, 127)]
    assert (where / "out" / "1.log").read_text() == f"{HOSTILE}|a b'c"
    assert not (where / "pwned").exists()


@pytest.mark.parametrize(("loop", "program"), [(1, EARLIER_RUNNER), (2, BACKGROUND_RUNNER)],
                         ids=["read-lines", "background"])
def test_a_slot_of_an_earlier_loop_runs_the_lines_written_in_its_form(
        tmp_path: Path, loop: int, program: str) -> None:
    """An upgraded worker writes again, in the loop's own form, the runs a slot of an
    earlier version's loop held: they run as they would have, argv and environment as
    given, a run seen before skipped."""
    with running_slot(tmp_path, program) as (where, _, tasks):
        os.write(tasks, task_line(loop, 3, task(["/bin/sh", "-c", 'printf "%s|%s" "$1" "$T"',
                                                 "sh", HOSTILE], {"T": "a b'c"})))
        os.write(tasks, task_line(loop, 3, task(["/bin/sh", "-c", "echo again > count"])))
        os.write(tasks, task_line(loop, 4, task(["/bin/sh", "-c", "exit 5"])))
        assert ended(where, 2) == [(3, 0), (4, 5)]
        assert (where / "out" / "3.log").read_text() == f"{HOSTILE}|a b'c"
        assert not (where / "pwned").exists()
        assert not (where / "count").exists()


def test_a_program_named_as_a_shell_s_own_command_or_an_assignment_is_run_as_a_program(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    """``exit`` run as the shell's own would end the slot, ``s`` would be its function, and
    ``A=1`` would set a variable: each is looked up as a program (none is one: 127), and
    the slot goes on; ``true`` runs ``/bin/true``."""
    where, runner, tasks = slot
    for run, argv in enumerate((["exit", "3"], ["s", "9"], ["A=1"], ["if"], ["true"]), 1):
        os.write(tasks, dispatch_line(run, task(argv)))
    os.write(tasks, dispatch_line(6, task(["/bin/sh", "-c", 'printf %s "${A-unset}"'])))
    assert ended(where, 6) == [(1, 127), (2, 127), (3, 127), (4, 127), (5, 0), (6, 0)]
    assert (where / "out" / "6.log").read_text() == "unset"
    assert runner.poll() is None


def test_a_run_seen_before_runs_once_and_lines_need_not_come_in_order(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    where, _, tasks = slot
    line = dispatch_line(5, task(["/bin/sh", "-c", "echo x >> count"]))
    os.write(tasks, line + line)
    os.write(tasks, dispatch_line(4, task(["/bin/sh", "-c", "echo y >> count"])))
    os.write(tasks, line)
    os.write(tasks, dispatch_line(6, task(["/bin/true"])))
    assert ended(where, 3) == [(5, 0), (4, 0), (6, 0)]
    assert (where / "count").read_text() == "x\ny\n"


def test_the_lines_a_restarted_worker_writes_again_are_skipped_after_many_more_runs(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    """A worker writes again only the lines of runs it held in the slot, at most a slot's
    depth of them, all among the last ``SEEN`` the slot started: those are never run twice,
    however many ran before them, and nothing is written per run to remember them."""
    where, _, tasks = slot
    first = 1
    for run in range(first, first + 3 * SEEN):
        os.write(tasks, dispatch_line(run, task(["/bin/true"])))
        ended(where, run)
    held = range(first + 3 * SEEN - MAX_DEPTH, first + 3 * SEEN)
    for run in held:  # the worker, restarted, writes its held runs' lines again
        os.write(tasks, dispatch_line(run, task(["/bin/sh", "-c", "echo again >> count"])))
    os.write(tasks, dispatch_line(first + 3 * SEEN, task(["/bin/true"])))
    assert ended(where, 3 * SEEN + 1)[-1] == (first + 3 * SEEN, 0)
    assert not (where / "count").exists()  # none of them ran twice
    assert sorted(p.name for p in where.iterdir()) == ["done", "out", "ready", "results",
                                                       "tasks"]


def test_a_stop_reaches_the_task_and_ends_the_slot(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    where, runner, tasks = slot
    os.write(tasks, dispatch_line(1, task(["/bin/sleep", "30"])))
    os.write(tasks, dispatch_line(2, task(["/bin/true"])))
    deadline = time.monotonic() + 10
    while not (where / "out" / "1.log").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.1)  # the sleep is exec'd
    os.killpg(runner.pid, signal.SIGTERM)
    assert runner.wait(10) == 0
    assert ended(where, 1) == [(1, 128 + signal.SIGTERM)]  # the second never ran


def test_a_stop_ends_an_idle_slot_at_once(
        slot: tuple[Path, subprocess.Popen[bytes], int]) -> None:
    """With no task running the stop's signal itself ends the slot: the shell waits on
    its input then, where a trapped signal would be taken only once a line came."""
    where, runner, tasks = slot
    os.write(tasks, dispatch_line(1, task(["/bin/true"])))
    assert ended(where, 1) == [(1, 0)]
    os.killpg(runner.pid, signal.SIGTERM)
    assert runner.wait(5) == -signal.SIGTERM
    assert sorted(p.name for p in (where / "out").iterdir()) == ["1.log"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_an_end_is_written_once_a_full_disk_has_room_again(tmp_path: Path) -> None:
    """A task that ends while the slot's disk is full is not lost: its end waits for room
    (the worker, woken only after it is written, holds the task's lease meanwhile)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        with running_slot(disk) as (where, _, tasks):
            filler = where / "filler"
            with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
                while True:
                    out.write(b"x" * 4096)
            os.write(tasks, dispatch_line(1, task(["/bin/true"])))
            deadline = time.monotonic() + 10
            while not (where / "out" / "1.log").exists():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            time.sleep(1.5)  # the task has ended; its end cannot be written
            assert results((where / "results").read_text()
                           if (where / "results").exists() else "") == []
            filler.unlink()
            assert ended(where, 1) == [(1, 0)]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
