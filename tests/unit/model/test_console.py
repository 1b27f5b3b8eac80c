"""A console's rules: its command and first size from the upgrade's query, the control
messages both ways, and a program's exit code."""

from __future__ import annotations

import pytest

from bodega.model.console import (
    MAX_ARGS,
    ClientControl,
    ServerControl,
    TerminalSize,
    client_control,
    console_command,
    exit_code,
    server_control,
    terminal_size,
)
from bodega.model.errors import BadRequest


def test_a_resize_is_read_and_written_as_its_typed_shape() -> None:
    message = client_control('{"resize": {"rows": 33, "cols": 101}}')
    assert message == ClientControl(resize=TerminalSize(rows=33, cols=101))
    assert client_control(message.model_dump_json()) == message


@pytest.mark.parametrize("text", [
    "", "resize", "{}", '{"resize": {"rows": 0, "cols": 80}}',
    '{"resize": {"rows": 24, "cols": 65536}}', '{"resize": {"rows": 24}}',
    '{"resize": {"rows": 24, "cols": 80, "x": 1}}', '{"resize": {"rows": 24, "cols": 80}, "y": 2}',
    '{"exit": 0}', '{"resize": {"rows": "a", "cols": 80}}', " " * 5000,
])
def test_anything_else_from_the_client_is_a_bad_request(text: str) -> None:
    with pytest.raises(BadRequest, match=r"invalid_argument: a console control message"):
        client_control(text)


def test_the_exit_message_round_trips_and_nothing_else_passes() -> None:
    assert server_control(ServerControl(exit=3).model_dump_json()) == ServerControl(exit=3)
    assert server_control('{"exit": 0}').exit == 0
    for text in ['{"exit": -1}', '{"exit": 256}', '{"exit": 1, "more": 2}', "[]", "3",
                 '{"resize": {"rows": 1, "cols": 1}}']:
        with pytest.raises(ValueError, match="the console sent a message it should not"):
            server_control(text)


@pytest.mark.parametrize(("rows", "cols", "size"), [
    (None, None, (24, 80)), ("", "", (24, 80)), ("33", None, (33, 80)),
    ("1", "65535", (1, 65535)), ("50", "200", (50, 200)),
])
def test_the_first_size_comes_from_the_query(rows: str | None, cols: str | None,
                                             size: tuple[int, int]) -> None:
    assert terminal_size(rows, cols) == TerminalSize(rows=size[0], cols=size[1])


@pytest.mark.parametrize(("rows", "cols", "named"), [
    ("0", "80", "rows"), ("24", "65536", "cols"), ("x", "80", "rows"), ("24", "-1", "cols"),
    ("٣", "80", "rows"), ("24", "8 0", "cols"),
])
def test_a_bad_size_is_refused_naming_it(rows: str, cols: str, named: str) -> None:
    with pytest.raises(BadRequest, match=rf"invalid_argument: {named} must be a number "
                                         r"from 1 to 65535"):
        terminal_size(rows, cols)


def test_the_command_is_the_query_argv_or_none_for_the_shell() -> None:
    assert console_command([]) == []
    assert console_command(["sh", "-c", "echo $HOME; exit 3"]) == [
        "sh", "-c", "echo $HOME; exit 3"]
    assert console_command(["ls", ""]) == ["ls", ""]  # an empty argument is an argument
    for bad, why in [([""], "names no program"), (["a\0b"], "NUL byte"),
                     (["x"] * (MAX_ARGS + 1), f"at most {MAX_ARGS}")]:
        with pytest.raises(BadRequest, match=why):
            console_command(bad)


@pytest.mark.parametrize(("returncode", "code"), [(0, 0), (3, 3), (255, 255), (-2, 130),
                                                  (-9, 137), (-15, 143)])
def test_a_program_killed_by_a_signal_exits_as_a_shell_says(returncode: int, code: int) -> None:
    assert exit_code(returncode) == code
