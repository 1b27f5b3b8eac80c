"""A real `bodega up` in a child process, its output read line by line as it comes."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import signal
import sys
from pathlib import Path
from typing import Any

from tests.ports_kit import free_port as free_port


def url_host(address: str) -> str:
    """A machine's address as a URL's host: a 6PN (IPv6) address in brackets."""
    return f"[{address}]" if ":" in address else address


def in_cluster(address: str, data_dir: Path, cidr: str) -> bool:
    """Whether a machine's address is its cluster's: of the machine range it was given
    (IPv4), or of the /48 its cluster id makes (a 6PN address: the private network)."""
    from bodega.networking.core.sixpn import cluster_prefix

    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        return ip in ipaddress.ip_network(cidr)
    return ip in cluster_prefix((data_dir / "cluster-id").read_text().strip())


async def unwire(data_dir: Path) -> None:
    """Remove whatever the stopped cluster of ``data_dir`` left on the host (a stop cut short
    by a failed test); `bodega up` that stops as it should has left nothing."""
    from tests.leftovers_kit import sweep_data_dir  # the kit itself needs nothing of bodega

    await sweep_data_dir(data_dir)


class UpProcess:
    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.args = args
        self.lines: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def start(self) -> UpProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bodega", "up", "--data-dir", str(self.data_dir), *self.args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line.decode(errors="replace").rstrip("\n"))
            self._changed.set()
        self._changed.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    async def until_line(self, text: str, timeout: float = 120.0) -> str:
        """The first line holding ``text``; fails if `bodega up` exits or takes too long."""
        async def wait() -> str:
            while True:
                found = next((line for line in self.lines if text in line), None)
                if found is not None:
                    return found
                assert self._reader is not None
                if self._reader.done():
                    raise AssertionError(f"bodega up ended without {text!r}:\n{self.output}")
                self._changed.clear()
                await self._changed.wait()
        try:
            return await asyncio.wait_for(wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {text!r} in {timeout:.0f}s:\n{self.output}") from None

    def state(self) -> dict[str, Any]:
        return dict(json.loads((self.data_dir / "cluster.json").read_text()))

    def token(self) -> str:
        return (self.data_dir / "api-token").read_text().strip()

    async def wait(self, timeout: float = 120.0) -> int:
        assert self.process is not None
        assert self._reader is not None
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await self._reader
        return code

    async def stop(self) -> int:
        """Ctrl-C, then wait for everything it runs to stop; returns its exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        return await self.wait()

    async def end(self, grace: float = 60.0) -> None:
        """A kit's teardown: Ctrl-C, and SIGKILL if it has not stopped within ``grace``."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), grace)
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
