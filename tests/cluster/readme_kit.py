"""The README's commands, read from the README itself, and a shell that runs them as typed.

``commands(section)`` reads the ``sh`` code block under a heading of README.md:
each command as a user types it (a line ending in a backslash joined with the
next), with the comment lines above it. ``Shell`` is one long-lived bash, so
what one command sets (``. .venv/bin/activate``, ``ID=$(...)``) holds for the
next, as in a terminal; each command's output and exit status come back
separately.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


@dataclass(frozen=True)
class Command:
    text: str  # as typed, continuation lines joined with a space, without a trailing note
    comment: str  # the comment lines just above it, joined
    note: str = ""  # a comment at the end of its line ("   # why it landed where it did")


def _command(line: str, comments: list[str]) -> Command:
    text, note = line, ""
    found = re.search(r"\s{2,}# ", line)
    if found:
        text, note = line[:found.start()], line[found.end():]
    return Command(text.strip(), " ".join(comments), note.strip())


def section(heading: str, readme: Path = README) -> str:
    """The text under ``heading`` (a Markdown heading line), up to the next heading (a
    ``#`` line outside a code block: a shell comment inside one is no heading)."""
    lines = readme.read_text().splitlines()
    start = lines.index(heading) + 1
    fenced = False
    for end in range(start, len(lines)):
        if lines[end].startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", lines[end]):
            return "\n".join(lines[start:end]) + "\n"
    return "\n".join(lines[start:]) + "\n"


def commands(heading: str, readme: Path = README) -> list[Command]:
    """Every command of the first ``sh`` block under ``heading``, in order."""
    body = section(heading, readme)
    block = re.search(r"```sh\n(.*?)```", body, flags=re.DOTALL)
    assert block is not None, f"no sh block under {heading!r}"
    out: list[Command] = []
    comments: list[str] = []
    pending = ""
    for line in block.group(1).splitlines():
        stripped = line.strip()
        if pending:
            pending += " " + stripped.removesuffix("\\").strip()
            if not stripped.endswith("\\"):
                out.append(_command(pending, comments))
                pending, comments = "", []
            continue
        if not stripped:
            comments = []
        elif stripped.startswith("#"):
            comments.append(stripped.lstrip("# "))
        elif stripped.endswith("\\"):
            pending = stripped.removesuffix("\\").strip()
        else:
            out.append(_command(stripped, comments))
            comments = []
    return out


def inline_commands(heading: str, starting: str, readme: Path = README) -> list[str]:
    """The inline code spans under ``heading`` that start with ``starting`` (prose commands,
    such as the second cluster's ``bodega up``), with their line breaks made spaces."""
    prose = re.sub(r"```.*?```", "", section(heading, readme), flags=re.DOTALL)
    body = " ".join(prose.split())
    return [span for span in re.findall(r"`([^`]+)`", body) if span.startswith(starting)]


@dataclass(frozen=True)
class Ran:
    command: str
    code: int
    output: str

    def __str__(self) -> str:
        return f"$ {self.command}\n{self.output}[exit {self.code}]"


class Shell:
    """One bash, its stdout and stderr merged, run in ``cwd`` with ``env``."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.cwd = cwd
        self.env = env
        self.process: asyncio.subprocess.Process | None = None
        self.transcript: list[Ran] = []

    async def __aenter__(self) -> Shell:
        self.process = await asyncio.create_subprocess_exec(
            "bash", "--noprofile", "--norc", cwd=self.cwd, env=self.env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None and self.process.returncode is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except TimeoutError:
                os.killpg(self.process.pid, 9)
                await self.process.wait()

    async def run(self, command: str, timeout: float = 300.0) -> Ran:
        """Run one command line as typed; its output and exit status."""
        assert self.process is not None
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        marker = f"::ran-{uuid.uuid4().hex}::"
        self.process.stdin.write(f"{command}\nprintf '\\n{marker}%s\\n' \"$?\"\n".encode())
        await self.process.stdin.drain()
        lines: list[str] = []

        async def read() -> int:
            assert self.process is not None
            assert self.process.stdout is not None
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"the shell ended during {command!r}:\n"
                                         + "".join(lines))
                line = raw.decode(errors="replace")
                if line.startswith(marker):
                    return int(line[len(marker):].strip())
                lines.append(line)
        try:
            code = await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            raise AssertionError(f"{command!r} did not end in {timeout:.0f}s:\n"
                                 + "".join(lines)) from None
        output = "".join(lines)
        ran = Ran(command, code, output[:-1] if output.endswith("\n\n") else output)
        self.transcript.append(ran)
        return ran

    def said(self) -> str:
        return "\n".join(str(ran) for ran in self.transcript)
