"""The exec line's frames between the worker and a VM's init, and matching answers to
their requests."""

from __future__ import annotations

import asyncio
import base64
import signal
import subprocess

import pytest

from bodega.wire.internal.worker_calls import EXEC_SLACK
from bodega.worker.drivers.vm.guest_exec import (
    ANSWER_GRACE,
    BOOT_WAIT,
    REQUEST_ID,
    Answer,
    End,
    ExecRequest,
    Output,
    Ready,
    parse_frame,
    read_answer,
    read_ready,
)

ID = "0123456789abcdef"
EARLIER = "fedcba9876543210"


def run_fields(request: ExecRequest) -> list[str]:
    line = request.run().decode()
    assert line.index("\n") == len(line) - 1, "one line"
    return line.split(" ")


def test_a_command_is_quoted_literals_the_init_reads_back_as_its_argv() -> None:
    argv = ["/bin/sh", "-c", "echo $HOME; $(reboot) `id`", "it's", "two\nlines", " ", "*"]
    fields = run_fields(ExecRequest(argv, 30, request_id=ID))
    assert fields[:4] == [ID, "run", "30.000", str(1 << 20)]
    script = base64.b64decode(fields[4]).decode()
    # Sourced as the init does, the arguments are the argv given, each whole, none run.
    printed = subprocess.run(["/bin/sh", "-c", 'eval "$1"; printf "%s\\0" "$@"', "sh", script],
                             capture_output=True, check=True).stdout
    assert printed.split(b"\0")[:-1] == [arg.encode() for arg in argv]
    assert fields[5] == "-\n", "no stdin"


def test_stdin_a_timeout_and_a_cap_go_in_the_run_line() -> None:
    request = ExecRequest(["cat"], 1.5, stdin=b"a\nb\0\xff", output_limit=10, request_id=ID)
    fields = run_fields(request)
    assert fields[2:4] == ["1.500", "10"]
    assert base64.b64decode(fields[5]) == b"a\nb\0\xff"
    assert request.hello() == f"{ID} hello\n".encode()
    with pytest.raises(ValueError, match="a command"):
        ExecRequest([], 1).run()


def test_each_request_has_an_id_of_its_own() -> None:
    ids = {ExecRequest(["true"], 1).request_id for _ in range(100)}
    assert len(ids) == 100
    assert all(REQUEST_ID.fullmatch(i) for i in ids)


@pytest.mark.parametrize(("line", "frame"), [
    (f"{ID} ready\n", Ready()),
    (f"{ID} out aGkK\n", Output("out", b"hi\n")),
    (f"{ID} err AAH/\n", Output("err", b"\0\1\xff")),
    (f"{ID} end 0 0\n", End(0, False)),
    (f"{ID} end 137 1\n", End(137, True)),
])
def test_the_inits_frames_for_this_request_are_read(line: str, frame: object) -> None:
    assert parse_frame(line.encode(), ID) == frame


@pytest.mark.parametrize("line", [
    f"{EARLIER} ready\n", f"{EARLIER} end 0 0\n", f"{EARLIER} out aGkK\n",
    f"{ID[3:]} end 0 0\n",  # the tail of a frame cut when its reader went away
    f"{ID} out !!!\n", f"{ID} end x 0\n", f"{ID} end 1000 0\n", f"{ID} end 0\n",
    f"{ID} ready now\n", f"{ID} run 1 2 3 4\n", b"\xff\xfe\n", "\n",
])
def test_another_requests_frame_or_garbage_is_none_of_this_ones(line: str | bytes) -> None:
    assert parse_frame(line.encode() if isinstance(line, str) else line, ID) is None


def test_an_answer_keeps_its_streams_apart_and_reads_codes_as_a_containers() -> None:
    answer = Answer()
    for frame in (Output("out", b"one\n"), Output("err", b"oops\n"), Output("out", b"two\xff")):
        answer.add(frame)
    result = answer.result(End(3, False))
    assert (result.exit_code, result.stdout, result.stderr, result.exit_signal) == \
        (3, "one\ntwo\ufffd", "oops\n", None)
    killed = Answer().result(End(128 + signal.SIGTERM, False))
    assert (killed.exit_code, killed.exit_signal) == (143, signal.SIGTERM)


def test_a_timed_out_answer_is_a_containers_timeout() -> None:
    answer = Answer()
    answer.add(Output("out", b"partial\n"))
    result = answer.result(End(137, True))
    assert (result.exit_code, result.exit_signal) == (124, signal.SIGKILL)
    assert result.stdout == "partial\n"
    assert result.stderr == "exec: timed out\n"


def test_an_answer_is_cut_at_its_limit_whatever_the_guest_sends() -> None:
    answer = Answer(limit=5)
    for _ in range(3):
        answer.add(Output("out", b"abcd"))
    assert answer.result(End(0, False)).stdout == "abcda"


def frames(*lines: str) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data("".join(f"{line}\n" for line in lines).encode())
    reader.feed_eof()
    return reader


async def test_a_late_answer_of_an_earlier_exec_is_never_taken_for_this_ones() -> None:
    request = ExecRequest(["id"], 5, request_id=ID)
    reader = frames(f"{EARLIER} ready", f"{EARLIER} out bGF0ZQo=", f"{ID} ready",
                    f"{EARLIER} end 124 1", f"{ID} out bWluZQo=", f"{EARLIER} out bGF0ZQo=",
                    f"{ID} end 0 0")
    await read_ready(reader, ID)
    result = await read_answer(reader, request)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "mine\n", "")


async def test_a_line_cut_by_the_vm_going_away_ends_the_answer() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(f"{ID} ready\n{ID} out aG".encode())
    reader.feed_eof()
    await read_ready(reader, ID)
    with pytest.raises(EOFError):
        await read_answer(reader, ExecRequest(["id"], 5, request_id=ID))


def test_a_vms_exec_answers_before_a_broker_relaying_it_gives_up() -> None:
    assert BOOT_WAIT + ANSWER_GRACE < EXEC_SLACK
