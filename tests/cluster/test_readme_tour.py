"""The README's commands, as written, on a fresh cluster.

A copy of the checkout's user-facing parts (examples, Makefile) with the
project's virtualenv beside it, as a fresh clone after `make up` has installed
it; there, what `make up` runs (`bodega up`, no flags: `.bodega/`, ports 4280
and 8080), then every command of the README's tour and of "Machines by hand"
in one shell, as a user types them, each read from README.md itself. What the
README's comments ask the user to do by hand (kill a worker, break the health
check) the test does at that point. Every command must exit 0 unless the
README says otherwise, and those that promise an answer must give it. The
second cluster of "Two commands" comes up beside the first, as written.

Only the deploys' smoke check is shortened, through its documented variable
(`BODEGA_SMOKE_TIME`), as in the other deploy tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bodega.cluster import host_network
from tests.cluster.readme_kit import Command, Ran, Shell, commands, inline_commands
from tests.cluster.up_kit import unwire

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")

REPO = Path(__file__).resolve().parents[2]
TOUR = "## A five-minute tour"
BY_HAND = "### Machines by hand"
TWO_COMMANDS = "## Two commands"

Check = Callable[[Ran], bool]
# What a command promises beyond exiting 0, keyed by the command as the README writes it.
# A README line that changes must change here too: the test names any line it cannot place.
PROMISES: dict[str, Check] = {
    "curl -s http://hello.localhost:8080/": lambda r: "hello from bodega" in r.output,
    "curl -s --cacert .bodega/ca.crt https://hello.localhost:8443/":
        lambda r: "hello from bodega" in r.output,
    "bodega status -a hello": lambda r: "started" in r.output,
    # The standby's state as the README names it: made, never started.
    "bodega status -a ticker": lambda r: any(
        "standby for" in line and "created" in line.split() for line in r.output.splitlines())
    and any("started" in line.split() for line in r.output.splitlines()),
    "curl -s http://image-app.localhost:8080/":
        lambda r: "hello from an image on bodega" in r.output,
    "curl -si http://hello2.localhost:8080/ | head -1":
        lambda r: r.output.startswith("HTTP/1.0 200 OK"),
    'bodega machine explain "$ID" --app hello2': lambda r: "ams-" in r.output,
    "bodega machine list --app hello2": lambda r: "started" in r.output,
}
# The note of the one command the README says fails.
BROKEN_DEPLOY = "exits 1, naming machine, step and why"
KILL_A_WORKER = "Kill a worker holding one of them"
BREAK_THE_CHECK = 'Break the health check (set HEALTHY = "false" in examples/hello/bodega.toml)'


class Up:
    """`bodega up` as `make up` runs it, in ``cwd``; its output read line by line."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.cwd = cwd
        self.args = args
        self.lines: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self, env: dict[str, str]) -> Up:
        self.process = await asyncio.create_subprocess_exec(
            str(self.cwd / ".venv" / "bin" / "bodega"), "up", *self.args, cwd=self.cwd,
            env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    async def until_up(self, timeout: float = 180.0) -> None:
        """Until the whole banner is read: its first line comes before the rest."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not any(line.startswith("Press Ctrl-C to stop.") for line in self.lines):
            assert self._reader is not None
            if self._reader.done() or asyncio.get_running_loop().time() > deadline:
                raise AssertionError("bodega up did not come up:\n" + "\n".join(self.lines))
            await asyncio.sleep(0.2)

    async def stop(self) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.process.wait(), 120)
        if self._reader is not None:
            await self._reader
        return code


@pytest.fixture
def checkout() -> Iterator[Path]:
    """The parts of a fresh clone a user touches, readable by the machines' own users."""
    clean_earlier_tours()
    where = Path(tempfile.mkdtemp(prefix=TOUR_PREFIX))
    where.chmod(0o755)
    shutil.copytree(REPO / "examples", where / "examples")
    shutil.copy2(REPO / "Makefile", where / "Makefile")
    (where / ".venv").symlink_to(Path(sys.prefix))
    yield where
    shutil.rmtree(where, ignore_errors=True)


TOUR_PREFIX = "bodega-tour-"


def clean_earlier_tours() -> None:
    """What a tour killed with its suite left: its machines run on (bodega never stops
    them on a SIGKILL), and their bridges hold the README's machine range, which this
    tour uses as written. `bodega clean` removes them, as the README tells a user to, and
    refuses a cluster still running (a tour of another run at the same time)."""
    for earlier in Path(tempfile.gettempdir()).glob(f"{TOUR_PREFIX}*"):
        cleaned = [subprocess.run([sys.executable, "-m", "bodega", "clean", "--data-dir",
                                   str(data)], capture_output=True, check=False).returncode == 0
                   for data in (earlier / ".bodega", earlier / ".bodega2") if data.is_dir()]
        if all(cleaned):
            shutil.rmtree(earlier, ignore_errors=True)


def shell_env(home: Path) -> dict[str, str]:
    """A new user's terminal: a home of its own (no bodega contexts yet), no bodega
    variables, the system's PATH."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("BODEGA_", "FLY_", "VIRTUAL_ENV", "XDG_"))}
    home.mkdir(exist_ok=True)
    keep["HOME"] = str(home)
    keep["PATH"] = os.pathsep.join(p for p in keep.get("PATH", os.defpath).split(os.pathsep)
                                   if not p.startswith(sys.prefix))
    keep["BODEGA_SMOKE_TIME"] = "1"
    return keep


def test_make_up_runs_bodega_up_without_flags() -> None:
    """What the tour starts is what `make up` runs."""
    recipe = re.search(r"^up:.*\n\t(.+)$", (REPO / "Makefile").read_text(), flags=re.MULTILINE)
    assert recipe is not None
    assert recipe.group(1).strip() == "$(BIN)/bodega up $(ARGS)"


def test_the_readme_lines_the_tour_acts_on_are_there() -> None:
    tour = commands(TOUR)
    assert any(KILL_A_WORKER in c.comment for c in tour)
    assert any(BREAK_THE_CHECK in c.comment for c in tour)
    assert BROKEN_DEPLOY in [c.note for c in tour]
    every = {c.text for c in tour + commands(BY_HAND)}
    assert set(PROMISES) <= every, set(PROMISES) - every


async def test_the_readme_tour_as_written(checkout: Path) -> None:
    env = shell_env(checkout / "home")
    up = await Up(checkout).start(env)
    second: Up | None = None
    try:
        await up.until_up()
        # Secure by default: where it can run, the private network is on with no flag, and
        # the banner names what it changed on the host.
        if host_network.unable("auto") is None:
            (said,) = [line for line in up.lines if line.startswith("Private network:")]
            assert said.startswith("Private network: on"), "\n".join(up.lines)
            assert any(line.startswith("  on this host: WireGuard bwg") for line in up.lines)
        async with Shell(checkout, env) as shell:
            for command in commands(TOUR) + commands(BY_HAND):
                await act_on_comment(command, checkout, shell)
                ran = await shell.run(command.text)
                judge(command, ran, shell)
                if command.note == BROKEN_DEPLOY:
                    # "...while the other keeps serving"
                    serving = await shell.run("curl -s http://hello.localhost:8080/")
                    assert "hello from bodega" in serving.output, shell.said()

        # "A second cluster on the same host", as the README writes it, beside the first.
        (line,) = inline_commands(TWO_COMMANDS, "bodega up --data-dir .bodega2")
        argv = line.split()[2:]
        second = await Up(checkout, *argv).start(env)
        await second.until_up()
        # "...reach the second with `bodega apps list --context bodega2`": its own apps.
        (reach,) = inline_commands(TWO_COMMANDS, "bodega apps list --context")
        async with Shell(checkout, env) as shell:
            await shell.run(". .venv/bin/activate")
            listed = await shell.run(reach)
            assert listed.code == 0, shell.said()
            assert "hello" not in listed.output, shell.said()  # the first cluster's app
    finally:
        # Both clusters stop at once, as two terminals' Ctrl-C would.
        codes = list(await asyncio.gather(up.stop(), *([second.stop()] if second else [])))
        await unwire(checkout / ".bodega")
        await unwire(checkout / ".bodega2")
    assert codes == [0] * len(codes), "\n".join(up.lines)


async def act_on_comment(command: Command, checkout: Path, shell: Shell) -> None:
    """Do what the README's comment above ``command`` asks the user to do by hand."""
    if KILL_A_WORKER in command.comment:
        state = json.loads((checkout / ".bodega" / "cluster.json").read_text())
        machines = json.loads((await shell.run("bodega machine list -a hello --json")).output)
        worker = await holder(shell, machines[0]["id"])
        (pid,) = [c["pid"] for c in state["components"] if c["name"] == worker]
        os.kill(pid, signal.SIGKILL)
        # "the proxy routes around it, and `bodega up` restarts it"
        serving = await shell.run("curl -s http://hello.localhost:8080/")
        assert "hello from bodega" in serving.output, shell.said()
        await until_restarted(checkout, worker, pid)
    if BREAK_THE_CHECK in command.comment:
        config = checkout / "examples" / "hello" / "bodega.toml"
        text = config.read_text()
        assert 'HEALTHY = "true"' in text
        config.write_text(text.replace('HEALTHY = "true"', 'HEALTHY = "false"'))


async def holder(shell: Shell, machine_id: str) -> str:
    explained = await shell.run(f"bodega machine explain {machine_id} -a hello --json")
    return str(json.loads(explained.output)["winner"]["worker"])


async def until_restarted(checkout: Path, worker: str, old_pid: int) -> None:
    for _ in range(300):
        state = json.loads((checkout / ".bodega" / "cluster.json").read_text())
        (now,) = [c for c in state["components"] if c["name"] == worker]
        if now["pid"] not in (None, old_pid):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"bodega up did not restart {worker}")


def judge(command: Command, ran: Ran, shell: Shell) -> None:
    if command.note == BROKEN_DEPLOY:
        assert ran.code == 1, shell.said()
        assert "healthz" in ran.output or "check" in ran.output, shell.said()
        return
    assert ran.code == 0, shell.said()
    promise = PROMISES.get(command.text)
    if promise is not None:
        assert promise(ran), shell.said()
