"""Every command's options as ``--help`` shows them, and the one line a command on one app
says when it cannot tell which app: the real commands, run in-process (no cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bodega.cli.main import BodegaCommands, app
from bodega.cli.session.errors import in_flags

runner = CliRunner()
WIDE = {"COLUMNS": "250"}  # one row per option: nothing of a row wraps onto the next line
# Commands whose --app is optional: co-location for a placement, a filter for jobs
# (a job is found by its name alone).
APP_OPTIONAL = {("machine", "place"), ("jobs", "status"), ("jobs", "list"),
                ("jobs", "cancel"), ("jobs", "logs"),
                # They read a file, not an app; -a names the app of a file that has none.
                ("config", "validate"), ("config", "show")}


def commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group under ``bodega``, the root too, by its path of names."""
    root = BodegaCommands(name="bodega")
    yield (), root

    def under(path: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from under((*path, name), sub)

    for entry in root.entries:
        yield from under((entry.name,), root.load(entry.name))


def row(help_text: str, option: str) -> list[str]:
    """The words of the options table's row that starts with ``option``."""
    for line in help_text.splitlines():
        words = line.strip("│ ").split()
        if words[:1] == ["*"]:  # a required option's mark
            words = words[1:]
        if words[:1] == [option]:
            return words
    raise AssertionError(f"no row for {option} in:\n{help_text}")


def shown_type(words: list[str]) -> str | None:
    """What a row shows after the option's names: its type (``<str>``), or None."""
    rest = [w for w in words if not w.startswith("-")]
    return rest[0] if rest and rest[0].startswith("<") else None


def test_a_flag_shows_no_value_in_any_help_and_an_option_shows_its_type() -> None:
    checked_flags = checked_values = 0
    for path, command in commands():
        done = runner.invoke(app, [*path, "--help"], env=WIDE)
        assert done.exit_code == 0, (path, done.output)
        assert shown_type(row(done.output, "--help")) is None, (path, done.output)
        for param in command.params:
            long = [o for o in param.opts if o.startswith("--")]
            if param.param_type_name != "option" or param.hidden or not long:
                continue
            shown = shown_type(row(done.output, long[0]))
            if param.is_flag:
                assert shown is None, (path, long[0], shown)
                checked_flags += 1
            else:
                assert shown is not None, (path, long[0])
                checked_values += 1
    # The walk reached every command: bodega has dozens of each.
    assert checked_flags > 50
    assert checked_values > 100


def dummy_args(command: Any) -> list[str]:
    """Values for a command's required options, then its required arguments: enough for
    it to get as far as choosing its app ("1" passes for a number and for a string)."""
    options = [word for p in command.params
               if p.param_type_name == "option" and p.required for word in (p.opts[0], "1")]
    arguments = ["1" for p in command.params if p.param_type_name == "argument" and p.required]
    return options + arguments


def app_commands() -> list[tuple[tuple[str, ...], Any]]:
    return [(path, command) for path, command in commands()
            if any("--app" in p.opts for p in command.params) and path not in APP_OPTIONAL]


def test_every_app_command_reads_the_app_from_config() -> None:
    found = app_commands()
    assert len(found) > 30
    for path, command in found:
        options = {o for p in command.params for o in p.opts}
        assert {"-a", "--app", "-c", "--config"} <= options, path


def test_without_an_app_anywhere_every_app_command_says_so_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no bodega.toml here
    monkeypatch.delenv("BODEGA_APP", raising=False)
    for path, command in app_commands():
        done = runner.invoke(app, [*path, *dummy_args(command)])
        assert (done.exit_code, done.output.splitlines()) == (1, [
            "Error: no app: pass -a APP, or run where a bodega.toml names one, or give its "
            "path with -c (there is no bodega.toml)"]), path


def test_api_words_are_passed_on_as_the_command_s_flags() -> None:
    assert in_flags("unable to destroy machine m1, not currently stopped, suspended or "
                    "failed; stop it first or use force=true", {"force=true": "--force"}) == (
        "unable to destroy machine m1, not currently stopped, suspended or failed; stop it "
        "first or use --force")
    assert in_flags("invalid_argument: jobs named j exist in apps a, b: name the app with "
                    "?app=", {"?app=": "-a APP"}) == (
        "invalid_argument: jobs named j exist in apps a, b: name the app with -a APP")
    assert in_flags("machine not found: m1", {"force=true": "--force"}) == (
        "machine not found: m1")
