"""`bodega ssh console`'s choices: the command it is given, the machine it opens a terminal
in (named, the oldest started one, or picked from a list), and the upgrade's query."""

from __future__ import annotations

import pytest

from bodega.cli.commands.ssh import (
    console_query,
    parse_command,
    pick,
    resize_message,
    selection_lines,
    started_machines,
)
from bodega.model.console import TerminalSize, client_control
from bodega.model.machine import Machine


def machine(id: str, state: str, created_at: str = "2025-01-01T00:00:00Z",
            private_ip: str = "") -> Machine:
    return Machine(id=id, name=f"m-{id}", region="ams", state=state, created_at=created_at,
                   private_ip=private_ip)


def test_the_command_is_split_as_a_shell_splits_it_expanding_nothing() -> None:
    assert parse_command(None) == []
    assert parse_command("echo hi") == ["echo", "hi"]
    assert parse_command("sh -c 'echo $HOME; exit 3'") == ["sh", "-c", "echo $HOME; exit 3"]
    assert parse_command('printf "%s\\n" "a b"') == ["printf", "%s\\n", "a b"]


@pytest.mark.parametrize(("given", "why"), [("", "is empty"), ("   ", "is empty"),
                                            ("echo 'unclosed", "No closing quotation")])
def test_a_command_that_is_none_is_refused_in_one_line(given: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as err:
        parse_command(given)
    assert "\n" not in str(err.value)


def test_the_list_holds_the_started_machines_oldest_first() -> None:
    machines = [machine("b", "started", "2025-01-02T00:00:00Z", "fdaa::2"),
                machine("s", "stopped", "2024-01-01T00:00:00Z"),
                machine("a", "started", "2025-01-01T00:00:00Z")]
    listed = started_machines(machines, "web")
    assert [m.id for m in listed] == ["a", "b"]
    assert selection_lines(listed) == ["  1. a  m-a  ams  -", "  2. b  m-b  ams  fdaa::2"]


def test_an_app_with_no_started_machine_has_nothing_to_list() -> None:
    with pytest.raises(ValueError, match=r"app web has no started machine \(its machines: "
                                         r"stopped\)"):
        started_machines([machine("s", "stopped")], "web")


def test_the_answer_names_a_machine_by_its_number_or_its_id() -> None:
    listed = [machine("a", "started"), machine("b", "started")]
    assert pick(listed, "1\n").id == "a"
    assert pick(listed, " 2 ").id == "b"
    assert pick(listed, "b").id == "b"
    for answer in ["0", "3", "", "c", "-1", "٢"]:
        with pytest.raises(ValueError, match="give a number from 1 to 2"):
            pick(listed, answer)


def test_the_query_carries_the_size_and_the_command_one_argument_each() -> None:
    size = TerminalSize(rows=40, cols=120)
    assert console_query([], size) == [("rows", "40"), ("cols", "120")]
    assert console_query(["sh", "-c", "a b"], size) == [
        ("rows", "40"), ("cols", "120"), ("command", "sh"), ("command", "-c"),
        ("command", "a b")]


def test_a_resize_is_the_message_the_worker_reads() -> None:
    size = TerminalSize(rows=33, cols=101)
    assert client_control(resize_message(size)).resize == size
