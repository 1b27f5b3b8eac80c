"""Reading a wrapper's state from /proc, with real shells in each state."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bodega.worker.drivers.process.procfs import _pids_where, child_pids, runs_another_program


@contextmanager
def shell(script: str) -> Iterator[subprocess.Popen[bytes]]:
    """``sh -c script`` that blocks on its stdin until the block ends."""
    popen = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.PIPE)
    try:
        yield popen
    finally:
        assert popen.stdin is not None
        popen.stdin.close()
        popen.kill()
        popen.wait()


def settle(popen: subprocess.Popen[bytes], children: int) -> list[int]:
    """The shell's children once there are ``children`` of them."""
    deadline = time.monotonic() + 10
    while len(found := child_pids(popen.pid)) != children:
        assert time.monotonic() < deadline, found
        time.sleep(0.01)
    return found


def test_a_shell_still_in_its_own_builtins_runs_no_program() -> None:
    with shell("read line") as popen:
        settle(popen, 0)
        assert not runs_another_program(popen.pid)


def test_a_forked_child_that_has_not_exec_d_is_not_a_program_yet() -> None:
    # A subshell is a fork that never execs: same command line, the parent's traps.
    with shell("(read line); :") as popen:
        [child] = settle(popen, 1)
        assert Path(f"/proc/{child}/cmdline").read_bytes() == \
            Path(f"/proc/{popen.pid}/cmdline").read_bytes()
        assert not runs_another_program(popen.pid)


def test_a_child_that_exec_d_a_program_is_one() -> None:
    with shell("cat; :") as popen:
        [child] = settle(popen, 1)
        deadline = time.monotonic() + 10
        while not runs_another_program(popen.pid):  # the fork may not have exec'd yet
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert os.readlink(f"/proc/{child}/exe").endswith("cat")


def test_a_gone_process_runs_nothing() -> None:
    with shell("exit 0") as popen:
        popen.wait()
    assert child_pids(popen.pid) == []
    assert not runs_another_program(popen.pid)


def test_the_parent_pid_scan_finds_what_the_children_file_lists() -> None:
    # The scan is what a kernel without CONFIG_PROC_CHILDREN falls back to.
    with shell("cat; :") as popen:
        found = settle(popen, 1)
        assert _pids_where(1, popen.pid) == found
