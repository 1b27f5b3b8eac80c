"""`bodega machine exec`: options anywhere before --, the command whole after it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from typer.testing import CliRunner

import bodega.cli.commands.machines as machines
from bodega.cli.main import app
from bodega.model.machine_answers import ExecAnswer


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    async def exec(self, app: str, machine_id: str, command: list[str],
                   timeout: int) -> ExecAnswer:
        self.calls.append((app, machine_id, command))
        return ExecAnswer(stdout="out\n", stderr="", exit_code=3)


@pytest.mark.parametrize("argv", [
    ["m1", "-a", "web", "--", "ls", "-la", "-a"],
    ["-a", "web", "m1", "--", "ls", "-la", "-a"],
    ["m1", "--app", "web", "--timeout", "5", "--", "ls", "-la", "-a"],
])
def test_the_command_after_the_separator_is_passed_whole_and_options_before_it_are_read(
        argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    client = Recorder()

    def call(_url: object, _token: object, work: Callable[[Any], Coroutine[Any, Any, Any]],
             context: object = None) -> Any:
        return asyncio.run(work(client))

    monkeypatch.setattr(machines, "call", call)
    ran = CliRunner().invoke(app, ["machine", "exec", *argv])
    assert ran.output == "out\n"
    assert ran.exit_code == 3  # the command's own
    # Before, "-a web" after the id and the "--" itself went to the machine as its command.
    assert client.calls == [("web", "m1", ["ls", "-la", "-a"])]
