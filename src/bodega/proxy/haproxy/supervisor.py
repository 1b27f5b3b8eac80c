"""Running HAProxy: start it, reload it seamlessly, restart it if it dies, stop it.

HAProxy runs in master-worker mode (``-W``) in the foreground. A reload is
``SIGUSR2`` to the master: it re-executes with the new config, hands the
listening sockets to the new worker (no connection is refused in between),
and the old worker finishes its open connections (``hard-stop-after``). The
config is checked (``haproxy -c``) before any reload, so a bad render never
replaces a good process. HAProxy gets ``PDEATHSIG``: if bodega's proxy is
killed, its data plane goes with it rather than holding the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import time
from pathlib import Path

from bodega.proxy.haproxy.runtime import RuntimeApi, RuntimeUnavailable
from bodega.runtime.waits import within

log = logging.getLogger("bodega.proxy.haproxy")

PR_SET_PDEATHSIG = 1
READY_TIMEOUT = 15.0


class HaproxyFailed(OSError):
    """HAProxy would not start, or rejected its configuration (the CLI prints one line)."""


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


Files = tuple[tuple[Path, str], ...]  # what the config reads beside it: maps, crt-list, certs


def _write_files(files: Files) -> None:
    for path, text in files:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # keys among them
        with os.fdopen(fd, "w") as handle:
            handle.write(text)


class HaproxyProcess:
    def __init__(self, binary: str, workdir: Path, api: RuntimeApi) -> None:
        self.binary = binary
        self.config_path = workdir / "haproxy.cfg"
        self.api = api
        self.process: asyncio.subprocess.Process | None = None
        self.reloads = 0
        self.restarts = 0
        self._relay: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, config: str, files: Files) -> None:
        await self._write(config, files)
        self.process = await asyncio.create_subprocess_exec(
            self.binary, "-W", "-db", "-f", str(self.config_path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, preexec_fn=_die_with_parent)
        assert self.process.stdout is not None
        self._relay = asyncio.create_task(_relay_log(self.process.stdout))
        await self._until_worker(None)

    async def reload(self, config: str, files: Files) -> None:
        if not self.running:
            await self.start(config, files)
            return
        assert self.process is not None
        await self._write(config, files)
        old = await self.api.worker_pid()
        self.process.send_signal(signal.SIGUSR2)
        await self._until_worker(old)
        self.reloads += 1

    async def _write(self, config: str, files: Files) -> None:
        """Write the files, then have HAProxy check them before anyone loads them."""
        staged = self.config_path.with_suffix(".new")
        await asyncio.to_thread(_write_files, (*files, (staged, config)))
        check = await asyncio.create_subprocess_exec(
            self.binary, "-c", "-f", str(staged), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT)
        out, _ = await check.communicate()
        if check.returncode != 0:
            raise HaproxyFailed(f"haproxy rejected its config: {out.decode(errors='replace')}")
        os.replace(staged, self.config_path)

    async def _until_worker(self, old_pid: int | None) -> None:
        """Wait until a worker (a new one, after a reload) answers on the admin socket."""
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if not self.running:
                raise HaproxyFailed(f"haproxy exited with {self._code()}")
            with contextlib.suppress(RuntimeUnavailable, ValueError):
                if await self.api.worker_pid() != old_pid:
                    return
            await asyncio.sleep(0.02)
        raise HaproxyFailed(f"haproxy did not answer on {self.api.path} in {READY_TIMEOUT:.0f}s")

    def _code(self) -> int | None:
        return self.process.returncode if self.process is not None else None

    async def stop(self) -> None:
        if not self.running:
            return
        assert self.process is not None
        self.process.terminate()
        try:
            await within(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self._relay is not None:
            with contextlib.suppress(Exception):
                await within(self._relay, 5)


async def _relay_log(stream: asyncio.StreamReader) -> None:
    """HAProxy's own messages into bodega's log: alerts as warnings, the rest as info
    (a server going to maintenance is the control plane's doing, not news)."""
    while line := await stream.readline():
        text = line.decode(errors="replace").rstrip()
        log.log(logging.WARNING if "[ALERT]" in text else logging.INFO, "haproxy: %s", text)
