"""A vm machine's console on a real worker: the worker's console route, as a broker opens
it, to a shell on the guest's own terminal (a virtio console, /dev/hvc0) that bodega's
init starts. One VM boots under emulation; everything is asked of it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest
from websockets.asyncio.client import ClientConnection

from bodega.model.console import TerminalSize
from bodega.model.errors import BodegaError
from bodega.wire.internal.worker_client import WorkerClient
from bodega.wire.transport.forward_link import open_link
from bodega.worker.drivers.vm.core.console_marks import ConsoleRequest, Marks
from bodega.worker.drivers.vm.core.qemu import console_socket
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.integration.daemon_kit import worker_daemon
from tests.integration.images.image_kit import build_image, needs_image_tools, registry
from tests.integration.images.test_image_machines import worker_args
from tests.integration.isolation.test_vm import exec_in, vm_machine
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

pytestmark = [
    needs_image_tools, pytest.mark.slow,
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu"),
    pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                       reason="needs the vm kernel (scripts/host-packages)"),
]

WAIT = 60.0  # seconds for an expected output, under emulation on a busy host
NAP = 4321  # seconds a sleep typed in the console sleeps, unless interrupted


class Screen:
    """A console's WebSocket, read as a terminal shows it: its bytes, then its exit code."""

    def __init__(self, link: ClientConnection) -> None:
        self.link = link
        self.seen = b""
        self.code: int | None = None

    async def type(self, keys: str) -> None:
        await self.link.send(keys.encode())

    async def resize(self, rows: int, cols: int) -> None:
        await self.link.send(json.dumps({"resize": {"rows": rows, "cols": cols}}))

    async def _more(self) -> None:
        message = await self.link.recv()
        if isinstance(message, str):
            self.code = json.loads(message)["exit"]
        else:
            self.seen += message

    async def expect(self, pattern: str) -> re.Match[bytes]:
        """Read until ``pattern`` shows; what follows it is kept for the next expect."""
        compiled = re.compile(pattern.encode())
        while (found := compiled.search(self.seen)) is None:
            if self.code is not None:
                raise AssertionError(f"the console ended before {pattern!r}: {self.seen!r}")
            try:
                await asyncio.wait_for(self._more(), WAIT)
            except TimeoutError:
                raise AssertionError(f"no {pattern!r} in {self.seen!r}") from None
        self.seen = self.seen[found.end():]
        return found

    async def exit_code(self) -> int:
        while self.code is None:
            await asyncio.wait_for(self._more(), WAIT)
        return self.code


async def test_a_vm_console_is_a_terminal_of_the_guests_own(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vmcon:v1")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                machine = await vm_machine(client, image)
                await client.wait(machine.id, "started", timeout=60)
                base = (daemon.url.replace("https://", "wss://") +
                        f"/v1/machines/{machine.id}/console?")

                @asynccontextmanager
                async def console(*command: str, rows: int = 24, cols: int = 80
                                  ) -> AsyncIterator[Screen]:
                    query = urlencode([("app", "img"), ("rows", rows), ("cols", cols),
                                       *(("command", part) for part in command)])
                    async with open_link(base + query, what="the worker",
                                         tls=TEST_CA.context("broker"), timeout=WAIT) as link:
                        yield Screen(link)

                async def sleeping() -> bool:
                    ps = await exec_in(client, machine.id, "busybox", "ps")
                    return f"sleep {NAP}" in ps["stdout"]

                # A command: the guest's kernel answers (the VM booting meanwhile is waited
                # for), on a terminal of the size asked; its exit code ends the console.
                async with console("/bin/sh", "-c", "busybox uname -r; busybox stty size; "
                                   "busybox tty; exit 5", rows=31, cols=97) as screen:
                    release = (await screen.expect(r"([0-9][^\r\n]*)\r\n")).group(1)
                    assert release.decode() != os.uname().release, "the guest's own kernel"
                    await screen.expect(r"31 97\r\n/dev/hvc0\r\n")
                    assert await screen.exit_code() == 5

                # The image's shell, typed at: its terminal echoes, edits and interrupts.
                async with console() as shell:
                    await shell.expect(r"[$#] ")
                    await shell.type("echo $((6*7)); [ -t 0 ] && echo term-$((8-1)); id -u\r")
                    await shell.expect(r"\r\n42\r\nterm-7\r\n0\r\n")
                    await shell.resize(33, 101)

                    async def resized() -> bool:
                        await shell.type("busybox stty size; echo size-$((2+2))\r")
                        found = await shell.expect(r"(?<!\d)(\d+ \d+)\r\nsize-4")
                        return found.group(1) == b"33 101"

                    await until(resized, timeout=WAIT)
                    await shell.type(f"sleep {NAP}\r")
                    await until(sleeping, timeout=WAIT)
                    await shell.type("\x03")
                    await shell.type("echo back-$((3+3))\r")
                    await shell.expect(r"back-6")
                    assert not await sleeping()

                    # One console at a time: a second one is refused before the upgrade.
                    with pytest.raises(BodegaError) as refused:
                        async with console():
                            pass
                    assert (refused.value.http_status, refused.value.status) == \
                        (409, "failed_precondition")
                    assert "has a console open already" in refused.value.message

                    await shell.type("exit 3\r")
                    assert await shell.exit_code() == 3

                # Its socket gone first, a console is hung up in the guest, its program
                # ended, and the next console opens.
                async with console() as gone:
                    await gone.expect(r"[$#] ")
                    await gone.type(f"sleep {NAP}\r")
                    await until(sleeping, timeout=WAIT)
                await until(lambda: _not(sleeping), timeout=WAIT)
                async with console("echo", "next", "one") as then:
                    await then.expect(r"next one\r\n")
                    assert await then.exit_code() == 0

                # A console its worker left running (as a worker restarted would): the
                # next start goes to it unmarked and is refused (503, try again), and its
                # hang-up ends the left one, so the one after opens.
                left = await stale_console(console_socket(machine.id))
                await until(sleeping, timeout=WAIT)
                with pytest.raises(BodegaError) as refused:
                    async with console():
                        pass
                assert (refused.value.http_status, refused.value.status) == \
                    (503, "unavailable"), refused.value.message
                assert "not taking consoles" in refused.value.message
                await until(lambda: _not(sleeping), timeout=WAIT)
                left.close()
                async with console("echo", "after", "a", "left", "one") as after:
                    await after.expect(r"after a left one\r\n")
                    assert await after.exit_code() == 0
                await client.destroy(machine.id, force=True)
        finally:
            await daemon.stop()


async def stale_console(line: Path) -> asyncio.StreamWriter:
    """A console started on the VM's terminal by hand, as a worker would, then left: a
    ``sleep`` in a shell, on the guest's terminal, that no worker knows of."""
    reader, writer = await asyncio.open_unix_connection(str(line))
    request = ConsoleRequest([], TerminalSize(rows=24, cols=80))
    writer.write(request.start_line())
    marks = Marks(request)
    seen = b""
    while b"# " not in seen:
        seen += marks.feed(await asyncio.wait_for(reader.read(4096), WAIT))
    writer.write(f"sleep {NAP}\r".encode())
    await writer.drain()
    return writer


async def _not(check: object) -> bool:
    assert callable(check)
    return not await check()
