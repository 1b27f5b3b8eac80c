"""The real `bodega` command imports only what the command run needs, and `--help` still
lists every command with its help line.

`bodega --help` loads neither typer nor pydantic nor aiohttp, only rich's console to
draw the list; a command that calls the API travels on asyncio's streams (never
aiohttp) and builds the models of its own answers only; one that prints a line, or a
table of plain text to a pipe, loads no rich. Checked in ``sys.modules`` of a real
process, never with a clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer

HEAVY = ("numpy", "matplotlib", "uvicorn", "starlette")
# The bodega.toml and machine config models and the daemons: importing a status or an app
# list loads none of them (the answer models load once an answer arrives to be read).
MODELS = ("bodega.deploy.core.config", "bodega.model.machine_config", "bodega.worker.daemon",
          "bodega.broker", "bodega.registry")
# What drawing the command list needs of bodega.cli; the commands' modules are not in it.
LISTING = {"bodega.cli", "bodega.cli.main", "bodega.cli.command_table", "bodega.cli.root_help"}


def imported_by(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=60)
    return set(json.loads(done.stdout))


def ran(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``bodega ARGS`` run to its end, and every module it had loaded by then."""
    kept = tmp_path / "modules.json"
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(kept)!r}, 'w').write(json.dumps(sorted("
            "sys.modules))))\n"
            "from bodega.cli.main import run\n"
            "run()")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path)
    return done, set(json.loads(kept.read_text()))


def packages(loaded: set[str]) -> set[str]:
    return {m.split(".")[0] for m in loaded}


class Api(BaseHTTPRequestHandler):
    """A Machines API with one app, enough for `apps list` and `apps create`."""

    APP = {"id": "a1", "name": "web", "status": "pending", "network": "default",
           "organization": {"name": "personal", "slug": "personal"}}

    def do_GET(self) -> None:
        answers = {"/v1/apps": {"total_apps": 1, "apps": [self.APP]},
                   "/v1/apps/web/releases": []}
        self._answer(answers.get(self.path.split("?")[0], {"error": "nope"}))

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer(self.APP)

    def _answer(self, doc: object) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_command_table_imports_no_command() -> None:
    loaded = imported_by("import bodega.cli.main")
    assert not packages(loaded) & {*HEAVY, "typer", "rich", "pydantic", "aiohttp"}
    assert {m for m in loaded if m.startswith("bodega.cli")} <= LISTING


@pytest.mark.parametrize("args", [["--help"], []], ids=["--help", "alone"])
def test_the_command_list_is_drawn_without_typer_pydantic_or_aiohttp(
        tmp_path: Path, args: list[str]) -> None:
    done, loaded = ran(tmp_path, *args)
    assert done.returncode == (0 if args else 2)
    assert "Commands" in done.stdout
    assert not packages(loaded) & {*HEAVY, "typer", "pydantic", "aiohttp", "asyncio"}
    # rich's console and tables only: no markdown, tracebacks or syntax highlighting
    assert not {m for m in loaded if m.startswith(("rich.markdown", "rich.traceback",
                                                    "rich.syntax", "markdown_it", "pygments"))}
    assert {m for m in loaded if m.startswith("bodega.cli")} <= LISTING


def test_status_apps_list_and_query_import_neither_daemons_nor_models() -> None:
    loaded = imported_by("import bodega.cli.main, bodega.cli.commands.apps, "
                         "bodega.cli.commands.status, "
                         "bodega.cli.commands.queries")
    assert not {m for m in loaded if m.split(".")[0] in HEAVY}
    assert not {m for m in loaded if m.startswith(MODELS)}


def test_listing_apps_travels_without_aiohttp_and_builds_only_its_answers(
        tmp_path: Path, api: str) -> None:
    done, loaded = ran(tmp_path, "apps", "list", "--api-url", api, "--token", "t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[1].split() == ["web", "personal", "pending", "-", "0", "0"]
    assert "bodega.wire.transport.stream_http" in loaded
    assert not packages(loaded) & {*HEAVY, "aiohttp"}
    assert "rich" not in packages(loaded)  # a table of plain cells, to a pipe, is written by hand
    assert "bodega.wire.public.apps" in loaded
    assert not {m for m in loaded if m.startswith((*MODELS, "bodega.model.machine",
                                                    "bodega.wire.public.fly",
                                                    "bodega.wire.public.platform"))}


def test_a_command_that_prints_one_line_loads_no_rich(tmp_path: Path, api: str) -> None:
    done, loaded = ran(tmp_path, "apps", "create", "web", "--api-url", api, "--token", "t")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "New app created: web\n"
    assert not packages(loaded) & {"rich", "aiohttp"}


def test_the_machine_commands_load_placement_reports_only_to_show_one() -> None:
    loaded = imported_by("import bodega.cli.root, bodega.cli.commands.machines")
    assert not {m for m in loaded if m.startswith(("bodega.cli.commands.placement_report",
                                                    "bodega.wire.public.platform",
                                                    "bodega.model.machine_config"))}


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

    from bodega.cli.root import BodegaCommands

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
