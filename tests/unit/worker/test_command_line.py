"""Reading a process's command line: the empty moment at the end of an exec is waited out,
a zombie's or a kernel thread's empty line is not."""

from __future__ import annotations

from bodega.worker.drivers.process.procfs import EXEC_SETTLE, PF_KTHREAD, command_line


def stat(state: str = "D", flags: int = 0) -> list[str]:
    """``/proc/<pid>/stat``'s fields after the command name: state first, flags seventh."""
    return [state, "1", "1", "1", "0", "-1", str(flags), *["0"] * 40]


def test_a_command_line_read_empty_while_its_exec_finishes_is_read_again() -> None:
    reads = iter([b"", b"", b"sh\0-c\0wrapper\0/run/1.pid\0"])
    pauses: list[float] = []
    argv = command_line(7, read=lambda _pid: next(reads), stat=lambda _pid: stat("D"),
                        pause=pauses.append)
    assert argv is not None
    assert b"/run/1.pid" in argv
    assert len(pauses) == 2


def test_a_zombie_or_a_kernel_thread_is_answered_at_once() -> None:
    for fields in (stat("Z"), stat("S", PF_KTHREAD | 0x40)):
        pauses: list[float] = []

        def fixed(_pid: int, fields: list[str] = fields) -> list[str]:
            return fields

        assert command_line(7, read=lambda _pid: b"", stat=fixed, pause=pauses.append) == []
        assert pauses == []


def test_a_line_that_stays_empty_is_given_up_on_and_a_gone_process_is_none() -> None:
    pauses: list[float] = []
    assert command_line(7, read=lambda _pid: b"", stat=lambda _pid: stat("S"),
                        pause=pauses.append) == []
    assert EXEC_SETTLE - 0.001 <= sum(pauses) <= EXEC_SETTLE + 0.001

    def gone(_pid: int) -> bytes:
        raise FileNotFoundError

    assert command_line(7, read=gone) is None
    assert command_line(7, read=lambda _pid: b"", stat=lambda _pid: None) is None
