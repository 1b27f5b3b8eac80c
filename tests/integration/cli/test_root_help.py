"""`bodega --help` and `bodega` alone draw the command list without typer (cli/root_help.py):
the same page typer draws for the group, byte for byte, and the same exit status, at
any width, in colour or not, however the program was started."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# typer's own page: the group run by typer, as `bodega` ran before (and still runs for
# anything but the list).
TYPER = ("import sys\n"
         "from bodega.cli.root import app\n"
         "app(prog_name=sys.argv.pop(1))")
OURS = ("import sys\n"
        "sys.argv[0] = sys.argv.pop(1)\n"
        "from bodega.cli.main import run\n"
        "run()")
SETTINGS = [{}, {"COLUMNS": "120"}, {"COLUMNS": "44"}, {"TERMINAL_WIDTH": "60"},
            {"FORCE_COLOR": "1"}, {"FORCE_COLOR": "1", "COLUMNS": "50"},
            {"PY_COLORS": "1", "NO_COLOR": "1"}, {"FORCE_COLOR": "1", "TERM": "dumb"},
            {"FORCE_COLOR": "1", "_TYPER_FORCE_DISABLE_TERMINAL": "1"}]


def page(code: str, program: str, args: list[str], settings: dict[str, str]
         ) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH", "FORCE_COLOR", "PY_COLORS",
                        "NO_COLOR", "GITHUB_ACTIONS", "_TYPER_FORCE_DISABLE_TERMINAL")}
    return subprocess.run([sys.executable, "-c", code, program, *args], capture_output=True,
                          env={**env, **settings}, timeout=60, check=False)


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: " ".join(f"{k}={v}" for k, v in
                                                                      s.items()) or "plain")
@pytest.mark.parametrize("args", [["--help"], []], ids=["--help", "alone"])
def test_the_list_is_typer_s_page(settings: dict[str, str], args: list[str]) -> None:
    theirs = page(TYPER, "bodega", args, settings)
    ours = page(OURS, "bodega", args, settings)
    assert b"Commands" in theirs.stdout
    assert (ours.stdout, ours.stderr, ours.returncode) == (
        theirs.stdout, theirs.stderr, theirs.returncode)


def test_run_as_a_module_it_is_called_python_m_bodega() -> None:
    ours = subprocess.run([sys.executable, "-m", "bodega", "--help"], capture_output=True,
                          timeout=60, check=True)
    theirs = page(TYPER, "python -m bodega", ["--help"], {})
    assert b"Usage: python -m bodega [OPTIONS] COMMAND [ARGS]..." in ours.stdout
    assert ours.stdout == theirs.stdout


def test_a_reader_that_stops_early_ends_it_quietly() -> None:
    ours = subprocess.run(f"{sys.executable} -m bodega --help | head -c 1", shell=True,
                          capture_output=True, timeout=60, check=False,
                          env={**os.environ, "COLUMNS": "2000"})
    assert ours.stdout == b" "
    assert ours.stderr == b""


def test_a_shell_asking_for_completions_gets_typer_s_answer() -> None:
    settings = {"_BODEGA_COMPLETE": "bash_complete", "COMP_WORDS": "bodega ap",
                "COMP_CWORD": "1"}
    theirs = page(TYPER, "bodega", [], settings)
    ours = page(OURS, "bodega", [], settings)
    assert b"Commands" not in theirs.stdout
    assert (ours.stdout, ours.stderr, ours.returncode) == (
        theirs.stdout, theirs.stderr, theirs.returncode)
