"""A vm console's stream read by its marks: whatever the chunks, the output between the
start and end marks and the code, nothing else."""

from __future__ import annotations

import base64
import shlex

from hypothesis import given
from hypothesis import strategies as st

from bodega.model.console import TerminalSize
from bodega.worker.drivers.vm.core.console_marks import ConsoleRequest, Marks, held_back

ID = "0123456789abcdef"
SIZE = TerminalSize(rows=33, cols=101)


def request(*argv: str) -> ConsoleRequest:
    return ConsoleRequest(list(argv), SIZE, ID)


def start(console_id: str = ID) -> bytes:
    return f"\x1b]bodega-start;{console_id}\x07".encode()


def end(code: int, console_id: str = ID) -> bytes:
    return f"\x1b]bodega-exit;{console_id};{code}\x07".encode()


def read(chunks: list[bytes]) -> tuple[bytes, int | None]:
    marks = Marks(request())
    output = b"".join(marks.feed(chunk) for chunk in chunks)
    return output, marks.code


def test_the_start_line_is_a_line_of_its_own_with_the_argv_as_quoted_literals() -> None:
    odd = ["/bin/sh", "-c", "echo $X 'q'; exit 3", "a\nb", ""]
    line = request(*odd).start_line()
    assert line.startswith(b"\nbodega-console " + ID.encode() + b" 33 101 ")
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 2
    script = base64.b64decode(line.split(b" ")[-1]).decode()
    assert script.startswith("set -- ")
    assert script.endswith("\n")
    assert shlex.split(script.removeprefix("set -- ")) == odd
    assert base64.b64decode(request().start_line().split(b" ")[-1]) == b"set -- \n"
    assert request().resize_words(TerminalSize(rows=5, cols=6)) == (ID, "5", "6")
    assert request().hangup_words() == (ID,)
    assert request().hangup_words(anyone=True) == (ID, "all")
    assert ConsoleRequest([], SIZE).console_id != ConsoleRequest([], SIZE).console_id


def test_only_what_comes_between_this_consoles_marks_is_output() -> None:
    echoed = b"\nbodega-console " + ID.encode() + b" 33 101 c2V0IC0tIAo=\n"
    earlier = end(0, "fedcba9876543210")  # an earlier console's last word, late
    output, code = read([echoed + earlier + start() + b"$ ls\r\nwww\r\n" + end(3) + b"late"])
    assert (output, code) == (b"$ ls\r\nwww\r\n", 3)
    assert read([b"nothing yet"]) == (b"", None)
    assert read([start() + b"still going"]) == (b"still going", None)


def test_what_looks_like_a_mark_but_is_not_one_is_output() -> None:
    other = end(4, "fedcba9876543210")
    bad_code = b"\x1b]bodega-exit;" + ID.encode() + b";12x\x07"
    big_code = b"\x1b]bodega-exit;" + ID.encode() + b";999\x07"
    output, code = read([start() + other + bad_code + big_code + b"tail" + end(0)])
    assert (output, code) == (other + bad_code + big_code + b"tail", 0)


@given(st.binary(max_size=40), st.integers(0, 255), st.data())
def test_chunks_cut_anywhere_read_the_same(body: bytes, code: int, data: st.DataObject) -> None:
    stream = b"boot noise\r\n" + start() + body + end(code) + b"after"
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    want = body if end(code) not in body and b"\x1b]bodega-exit;" not in body else None
    output, read_code = read(chunks)
    if want is not None:
        assert (output, read_code) == (want, code)


def test_a_tail_that_may_begin_a_mark_is_held_back() -> None:
    mark = end(0)[:-2]
    assert held_back(b"abc", mark) == 0
    assert held_back(b"abc\x1b", mark) == 1
    assert held_back(b"abc\x1b]bodega-ex", mark) == len(b"\x1b]bodega-ex")
    marks = Marks(request())
    assert marks.feed(start() + b"out\x1b]bodega-ex") == b"out"
    assert marks.feed(b"tra") == b"\x1b]bodega-extra"
    assert marks.feed(end(7)[:-1]) == b""  # the code may go on: "7" could be "71"
    assert marks.code is None
    assert marks.feed(b"\x07more") == b""
    assert marks.code == 7
