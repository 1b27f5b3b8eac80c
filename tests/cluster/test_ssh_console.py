"""`bodega ssh console` on a real `bodega up`: a terminal in a process machine.

The real command, a child process, runs on a real pseudo-terminal of the test's (its
controlling terminal: SIGWINCH reaches it from the kernel when the test resizes it),
and is typed at as a user types: a shell in the machine answers `echo $((6*7)); tty`
with 42 and a /dev/pts/ line, `stty size` follows the local terminal's resize,
Ctrl-C interrupts a `sleep` (the shell comes back, the command runs on), and
`exit 3` ends the command with exit code 3. `-C "echo hi"` prints hi and exits 0;
a stopped machine gets one error line and exit code 1. The route's refusals come
before the upgrade, in the error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import termios
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from bodega.runtime.waits import when_readable
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.cluster.deploy_kit import Cli, readable_dir, until, up_cluster
from tests.cluster.test_deploy_image_cli import image_app
from tests.cluster.up_kit import UpProcess
from tests.integration.images.image_kit import needs_image_tools
from tests.python_kit import machine_python

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="bodega up with machines needs root"),
              pytest.mark.asyncio(loop_scope="module")]

SLEEPER = "import time\nwhile True: time.sleep(3600)"
WAIT = 60.0  # seconds for an expected output to come
NAP = 4321  # seconds a sleep typed in the console sleeps, unless interrupted


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory
                  ) -> AsyncIterator[tuple[Cli, UpProcess]]:
    """One `bodega up` for the module: each test's apps are its own."""
    async with up_cluster(tmp_path_factory.mktemp("console"), workers=1) as shared:
        yield shared


def napping() -> bool:
    """A ``sleep NAP`` runs on this host (in the machine: its processes are the host's)."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            if argv[-2:] == [b"sleep", str(NAP).encode()]:
                return True
    return False


class Typist:
    """A command on a pseudo-terminal: the test types at it and reads what it shows."""

    def __init__(self, master: int, process: asyncio.subprocess.Process) -> None:
        self.master = master
        self.process = process
        self.seen = b""

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def expect(self, pattern: str) -> re.Match[bytes]:
        """Read until ``pattern`` shows; the text after it is kept for the next expect."""
        compiled = re.compile(pattern.encode())

        async def more() -> None:
            await when_readable(self.master)
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: the command has ended and closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"the terminal closed before {pattern!r}: {self.seen!r}")
            self.seen += chunk

        while (found := compiled.search(self.seen)) is None:
            try:
                await asyncio.wait_for(more(), WAIT)
            except TimeoutError:
                raise AssertionError(f"no {pattern!r} in {self.seen!r}") from None
        self.seen = self.seen[found.end():]
        return found

    async def rest(self) -> bytes:
        """Everything shown until the command ends and closes the terminal."""
        with contextlib.suppress(AssertionError):
            await self.expect(r"\Z(?!x)x")  # never matches: reads to the end
        return self.seen

    def resize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.process.wait(), WAIT)


@contextlib.asynccontextmanager
async def on_terminal(cli: Cli, *args: str) -> AsyncIterator[Typist]:
    """``bodega ARGS`` with a new pseudo-terminal as its controlling terminal and stdio."""
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    os.set_blocking(master, False)
    process = await asyncio.create_subprocess_exec(
        "setsid", "--ctty", sys.executable, "-m", "bodega", *args, env=cli.env,
        stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    try:
        yield Typist(master, process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)


async def refusal(url: str, token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, additional_headers=headers, proxy=None, open_timeout=60):
            pass
    response = refused.value.response
    return response.status_code, json.loads(response.body)


async def on_host() -> bool:
    return napping()


def in_machine(cli: Cli, app: str, machine_id: str) -> Callable[[], Awaitable[bool]]:
    """Whether a ``sleep NAP`` runs in the machine, as its own ``ps`` says (a sandbox's
    processes are not the host's)."""
    async def check() -> bool:
        code, out, err = await cli.run("machine", "exec", machine_id, "-a", app, "--",
                                       "/bin/busybox", "ps")
        assert code == 0, err
        return f"sleep {NAP}" in out
    return check


async def a_shell_typed_at(cli: Cli, app: str, machine_id: str, *command: str,
                           tools: str = "", sleeping: Callable[[], Awaitable[bool]] = on_host,
                           named: str | None = r"/dev/pts/\d+") -> None:
    """A shell in the machine, typed at: arithmetic and its terminal's name, a resize,
    Ctrl-C in a sleep, and an exit code (``tools``: what runs tty, stty and sleep;
    ``sleeping``: whether the sleep runs; ``named``: its terminal's name there, if it has
    one)."""
    async with on_terminal(cli, "ssh", "console", "-a", app, "--machine", machine_id,
                           *command) as shell:
        await shell.expect(r"[$#] ")  # the shell's prompt
        shell.type("echo ready-$((1+1))\r")
        await shell.expect(r"ready-2")
        shell.type("echo $((6*7)); [ -t 0 ] && [ -t 1 ] && echo term-$((8-1))\r")
        await shell.expect(r"(?<!\d)42\r?\nterm-7\r?\n")
        if named is not None:  # a gVisor sandbox's terminal has none: its /dev has no pts
            shell.type(f"{tools}tty\r")
            # (the shell's prompt may come after the echo of what was typed, before the output)
            await shell.expect(rf"\n(?:[$#] )?{named}\r?\n")

        # The local terminal resized: the kernel tells the command (SIGWINCH), which
        # tells the machine's terminal; stty there reads the new size.
        shell.resize(33, 101)

        async def resized() -> bool:
            shell.type(f"{tools}stty size; echo size-$((2+2))\r")
            found = await shell.expect(r"(?<!\d)(\d+ \d+)\r?\nsize-4")
            return found.group(1) == b"33 101"

        await until(resized)

        # Ctrl-C: the far terminal makes it SIGINT for the sleep; the shell comes back.
        shell.type(f"{tools}sleep {NAP}\r")
        await shell.expect(rf"sleep {NAP}\r?\n")
        await until(sleeping)  # running (a Ctrl-C before it would miss it)
        shell.type("\x03")
        shell.type("echo back-$((3+3))\r")
        await shell.expect(r"back-6")
        assert not await sleeping()
        assert shell.process.returncode is None

        shell.type("exit 3\r")
        assert await shell.exit_code() == 3


async def test_ssh_console_is_a_terminal_in_the_machine(
        cluster: tuple[Cli, UpProcess]) -> None:
    cli, _up = cluster
    await cli.ok("apps", "create", "con")
    await cli.ok("apps", "create", "other")
    made = json.loads(await cli.ok("machine", "run", "-a", "con", "--json", "--",
                                   machine_python(), "-c", SLEEPER))
    machine_id = made["id"]
    assert made["state"] == "started"

    # -- the route's refusals, before any upgrade --------------------------------------
    api, admin = cli.env["BODEGA_API_URL"], cli.env["BODEGA_API_TOKEN"]
    ws = api.replace("http://", "ws://") + "/v1/apps/{app}/machines/{id}/console"
    mine = ws.format(app="con", id=machine_id)
    status, body = await refusal(mine, None)
    assert (status, body["status"]) == (401, "unauthenticated"), body
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {admin}"}) as http:
        made_token = await http.post(f"{api}/v1/apps/other/deploy_token", json={})
        others = made_token.json()["token"]
        plain = await http.get(f"{api}/v1/apps/con/machines/{machine_id}/console")
        assert (plain.status_code, plain.json()["status"]) == (400, "invalid_argument")
        assert "is a WebSocket" in plain.json()["error"]
    status, body = await refusal(mine, others)  # a token of another app sees no con
    assert (status, body["status"]) == (404, "not_found"), body
    status, body = await refusal(mine + "?rows=0", admin)
    assert (status, body["status"]) == (400, "invalid_argument"), body
    assert "rows must be a number from 1 to 65535" in body["error"]
    status, body = await refusal(ws.format(app="con", id="0" * 14), admin)
    assert (status, body["status"]) == (404, "not_found"), body

    await a_shell_typed_at(cli, "con", machine_id)

    # -- a command, in the machine picked from the list -----------------------------------
    async with on_terminal(cli, "ssh", "console", "-a", "con", "-C", "echo hi") as one:
        await one.expect(r"hi\r?\n")
        assert await one.exit_code() == 0
    async with on_terminal(cli, "ssh", "console", "-a", "con", "-s", "-C",
                           "sh -c 'echo picked-$((4+5))'") as picked:
        await picked.expect(rf"  1\. {machine_id} .*\r?\nSelect a machine \[1-1\]: ")
        picked.type("1\r")
        await picked.expect(r"picked-9\r?\n")
        assert await picked.exit_code() == 0

    # -- the command gone: the machine's terminal hung up, its program ended -------------
    async with on_terminal(cli, "ssh", "console", "-a", "con") as gone:
        await gone.expect(r"[$#] ")
        gone.type(f"sleep {NAP}\r")
        await until(lambda: napping())
        gone.process.kill()
        await gone.exit_code()
        await until(lambda: not napping())  # SIGHUP, from the worker's closed terminal

    # -- a stopped machine: one line, exit code 1 ------------------------------------------
    await cli.ok("machine", "stop", machine_id, "-a", "con")

    async def stopped() -> bool:
        shown = await cli.json("machine", "status", machine_id, "-a", "con")
        return bool(shown["state"] == "stopped")

    await until(stopped)
    async with on_terminal(cli, "ssh", "console", "-a", "con", "--machine",
                           machine_id) as refused:
        said = re.sub(r"\x1b\[[0-9;]*m", "", (await refused.rest()).decode()).strip()
        assert await refused.exit_code() == 1
        assert said.splitlines() == [
            f"Error: failed_precondition: machine {machine_id} is stopped, not started"], \
            said


@needs_image_tools
@pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")
@pytest.mark.parametrize("isolation", [
    "container",
    pytest.param("sandbox", marks=pytest.mark.skipif(shutil.which("runsc") is None,
                                                     reason="needs runsc")),
])
async def test_ssh_console_reaches_an_image_machine(
        cluster: tuple[Cli, UpProcess], isolation: str) -> None:
    """The oci driver's console, in a container (crun, or runc) and in a gVisor sandbox
    (runsc): the runtime's exec with a terminal of its own, copied to the worker's."""
    app = f"con-{isolation}"
    cli, up = cluster
    async with image_app_deployed(cli, up, app, isolation) as machine_id:
        await a_shell_typed_at(cli, app, machine_id, "-C", "/bin/busybox sh",
                               tools="/bin/busybox ",
                               sleeping=in_machine(cli, app, machine_id),
                               named=None if isolation == "sandbox" else r"/dev/pts/\d+")


@contextlib.asynccontextmanager
async def image_app_deployed(cli: Cli, up: UpProcess, app: str,
                             isolation: str) -> AsyncIterator[str]:
    """``app`` deployed from an image built here, its machines in ``isolation``: its
    machine's id. The image is removed from the build host after."""
    (registry,) = [c["registry"] for c in up.state()["components"]
                   if c["role"] == "registry"]
    built: list[str] = []
    try:
        with readable_dir() as apps:
            toml = image_app(apps, app, "page\n")
            if isolation != "container":
                toml.write_text(toml.read_text() +
                                f'\n[[vm]]\n  isolation = "{isolation}"\n')
            await cli.ok("deploy", "-c", str(toml))
            built.append(f"{registry}/{app}:v1")
        yield (await cli.machines(app))[0]["id"]
    finally:
        for reference in built:
            subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True,
                           check=False)


@needs_image_tools
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu")
@pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                    reason="needs the vm kernel (scripts/host-packages)")
async def test_ssh_console_reaches_a_vm_machine(cluster: tuple[Cli, UpProcess]) -> None:
    """A vm machine's console runs on its guest's own terminal (a virtio console, the
    guest's /dev/hvc0), started by its init: the guest's kernel answers, the shell is
    typed at as in any machine, one console at a time (a second gets 409 in the error
    shape), and one whose command is gone is hung up in the guest, the next one opening."""
    app = "con-vm"
    cli, up = cluster
    async with image_app_deployed(cli, up, app, "vm") as machine_id:
        sleeping = in_machine(cli, app, machine_id)

        # The guest's kernel, not the host's; the command's exit code is the CLI's.
        async with on_terminal(cli, "ssh", "console", "-a", app, "--machine", machine_id,
                               "-C", "/bin/busybox sh -c 'uname -r; exit 5'") as kernel:
            found = await kernel.expect(r"([0-9][^\r\n]*)\r?\n")
            assert found.group(1).decode() != os.uname().release
            assert found.group(1).endswith(b"-cloud-amd64"), found.group(1)
            assert await kernel.exit_code() == 5

        await a_shell_typed_at(cli, app, machine_id, "-C", "/bin/busybox sh",
                               tools="/bin/busybox ", sleeping=sleeping,
                               named=r"/dev/hvc0")

        # One console at a time: a second, while one is open, is refused before the
        # upgrade; the first one's command gone, its program is hung up in the guest.
        api, admin = cli.env["BODEGA_API_URL"], cli.env["BODEGA_API_TOKEN"]
        url = (api.replace("http://", "ws://") +
               f"/v1/apps/{app}/machines/{machine_id}/console")
        async with on_terminal(cli, "ssh", "console", "-a", app, "--machine", machine_id,
                               "-C", "/bin/busybox sh") as first:
            await first.expect(r"[$#] ")
            status, body = await refusal(url, admin)
            assert (status, body["status"]) == (409, "failed_precondition"), body
            assert "has a console open already" in body["error"], body
            first.type(f"/bin/busybox sleep {NAP}\r")
            await until(sleeping)
            first.process.kill()
            await first.exit_code()
            await until(lambda: negated(sleeping), timeout=30)
        async with on_terminal(cli, "ssh", "console", "-a", app, "--machine", machine_id,
                               "-C", "/bin/busybox echo next one") as then:
            await then.expect(r"next one\r?\n")
            assert await then.exit_code() == 0
async def negated(check: Callable[[], Awaitable[bool]]) -> bool:
    return not await check()
