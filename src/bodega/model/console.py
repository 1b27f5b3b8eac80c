"""A console's rules (``bodega ssh console``): its command, its terminal's size, its messages.

A console is a program on a pseudo-terminal in a machine, reached through the same
WebSocket relay as a port forward (CLI, broker, worker). Binary frames carry the
terminal's bytes both ways; text frames carry small typed control messages, checked
here: the client's ``{"resize": {"rows": R, "cols": C}}`` and the worker's
``{"exit": CODE}``, sent once the program ended, before the worker closes. The
command and the first size are the upgrade's query: ``command`` (repeated: an argv)
and ``rows``/``cols``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bodega.model.errors import BadRequest

DEFAULT_ROWS, DEFAULT_COLS = 24, 80
MAX_SIDE = 65535  # struct winsize holds unsigned shorts
MAX_ARGS = 256  # a console's command: the arguments it may have
MAX_CONTROL = 4096  # bytes of a control message
CONSOLE_TERM = "xterm"  # a console program's TERM, unless the machine's environment sets one


class TerminalSize(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rows: int = Field(ge=1, le=MAX_SIDE)
    cols: int = Field(ge=1, le=MAX_SIDE)


class ClientControl(BaseModel):
    """A text frame from the client: the terminal's new size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resize: TerminalSize


class ServerControl(BaseModel):
    """A text frame from the worker: the program's exit code, the console's last word."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exit: int = Field(ge=0, le=255)


def client_control(text: str) -> ClientControl:
    """A client's control message; BadRequest for anything else."""
    if len(text) > MAX_CONTROL:
        raise BadRequest(f"invalid_argument: a console control message is at most "
                         f"{MAX_CONTROL} bytes")
    try:
        return ClientControl.model_validate_json(text)
    except ValidationError:
        raise BadRequest('invalid_argument: a console control message is '
                         '{"resize": {"rows": R, "cols": C}}') from None


def server_control(text: str) -> ServerControl:
    """The worker's control message; ValueError for anything else."""
    try:
        return ServerControl.model_validate_json(text)
    except ValidationError:
        raise ValueError(f"the console sent a message it should not: {text[:80]!r}") from None


def terminal_size(rows: str | None, cols: str | None) -> TerminalSize:
    """The first size, from the upgrade's query (either missing: the usual 24 by 80)."""
    def side(value: str | None, name: str, default: int) -> int:
        if value is None or value == "":
            return default
        if not (value.isascii() and value.isdigit() and len(value) <= 5) \
                or not 1 <= int(value) <= MAX_SIDE:
            raise BadRequest(f"invalid_argument: {name} must be a number from 1 to {MAX_SIDE}, "
                             f"not {value[:20]!r}")
        return int(value)

    return TerminalSize(rows=side(rows, "rows", DEFAULT_ROWS), cols=side(cols, "cols",
                                                                          DEFAULT_COLS))


def console_command(args: list[str]) -> list[str]:
    """The command from the query's ``command`` values: an argv, [] for the machine's shell."""
    if len(args) > MAX_ARGS:
        raise BadRequest(f"invalid_argument: a console's command has at most {MAX_ARGS} "
                         "arguments")
    if any("\0" in arg for arg in args):
        raise BadRequest("invalid_argument: a console's command may not hold a NUL byte")
    if args and not args[0]:
        raise BadRequest("invalid_argument: a console's command names no program")
    return list(args)


def exit_code(returncode: int) -> int:
    """A program's exit code as a shell says it: killed by signal N, 128+N."""
    return 128 - returncode if returncode < 0 else min(returncode, 255)
