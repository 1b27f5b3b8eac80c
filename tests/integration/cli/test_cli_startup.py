"""The real `bodega` command imports only what the command run needs, and `--help` still
lists every command with its help line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import typer

HEAVY = ("numpy", "matplotlib", "uvicorn", "starlette")
# The bodega.toml and machine config models and the daemons: importing a status or an app
# list loads none of them (the answer models load once an answer arrives to be read).
MODELS = ("bodega.deploy.config", "bodega.model.machine_config", "bodega.worker.daemon",
          "bodega.broker", "bodega.registry")


def imported_by(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(done.stdout))


def test_the_command_table_imports_no_command() -> None:
    loaded = imported_by("import bodega.cli.main")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert "aiohttp" not in loaded
    assert not {m for m in loaded if m.startswith("bodega.cli.") and m not in (
        "bodega.cli.main", "bodega.cli.lazy_commands")}


def test_status_and_apps_list_import_neither_daemons_nor_models() -> None:
    loaded = imported_by("import bodega.cli.main, bodega.cli.apps, bodega.cli.status")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert not {m for m in loaded if m.startswith(MODELS)}


def test_help_lists_every_command_with_its_help_line() -> None:
    from bodega.cli.main import COMMANDS

    done = subprocess.run([sys.executable, "-m", "bodega", "--help"], capture_output=True,
                          text=True, check=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    for entry in COMMANDS:
        assert any(line.split() == ["│", entry.name, *entry.help.split(), "│"]
                   for line in done.stdout.splitlines()), entry.name


def test_each_help_line_is_the_command_s_own() -> None:
    from bodega.cli.main import COMMANDS

    for entry in COMMANDS:
        target = entry.load()
        if isinstance(target, typer.Typer):
            assert target.info.help == entry.help, entry.name
        else:
            assert callable(target), entry.name


def test_a_group_s_subcommands_run_through_the_real_command() -> None:
    done = subprocess.run([sys.executable, "-m", "bodega", "context", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert {"list", "use", "add", "remove", "show"} <= {
        line.split()[1] for line in done.stdout.splitlines() if line.startswith("│ ")}
    done = subprocess.run([sys.executable, "-m", "bodega", "contxt"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "Did you mean 'context'?" in done.stderr


def test_no_help_text_is_eaten_as_markup() -> None:
    """`--help` renders help as rich markup, where "[default: all]" is a tag and vanishes;
    a bracket meant to be shown is escaped (``\\[``) and shows as one."""
    from rich.text import Text

    from bodega.cli.main import BodegaCommands

    group = BodegaCommands(name="bodega")

    def texts(command: object) -> list[tuple[str, str]]:
        found = [(getattr(command, "name", ""), getattr(command, "help", None) or "")]
        found += [(f"{getattr(command, 'name', '')} {getattr(p, 'name', '')}",
                   getattr(p, "help", None) or "") for p in getattr(command, "params", [])]
        for sub in getattr(command, "commands", {}).values():
            found += texts(sub)
        return found

    for entry in group.entries:
        for where, text in texts(group.load(entry.name)):
            # An escaped bracket (``\\[``) is how help shows a literal one: it renders as ``[``.
            shown = text.replace("\\[", "[")
            assert Text.from_markup(text).plain == shown, f"{where}: {text!r}"
