"""The local cluster's image registry: Debian's ``docker-registry`` (CNCF distribution).

``bodega image-registry`` runs it as a supervised component of ``bodega up``:
it writes the registry's configuration (storage under the data dir, HTTP on
127.0.0.1), starts it, writes the ready file once ``GET /v2/`` answers, and
lives exactly as long as the registry does (a SIGTERM is passed on), so the
supervisor's restarts and stops apply to it like to any component.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from pathlib import Path

import aiohttp

from bodega.runtime.lifecycle import until_stopped, write_ready
from bodega.runtime.ready import Ready

PROGRAM = "docker-registry"
READY_TIMEOUT = 30.0


def registry_config(storage: Path, host: str, port: int) -> str:
    return (f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {host}:{port}\n")


def write_config(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def _answers(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(
                url, timeout=aiohttp.ClientTimeout(total=2)) as reply:
            return reply.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def run_registry(data_dir: Path, host: str, port: int, ready_file: Path | None,
                       exit_with_parent: bool = False) -> int:
    program = shutil.which(PROGRAM)
    if program is None:
        raise ValueError(f"{PROGRAM} is not installed: apt-get install -y docker-registry")
    config = data_dir / "registry.yml"
    write_config(config, registry_config(data_dir / "storage", host, port))
    process = await asyncio.create_subprocess_exec(program, "serve", str(config))
    stop = asyncio.create_task(until_stopped(exit_with_parent))
    exited = asyncio.create_task(process.wait())
    try:
        url = f"http://{host}:{port}"
        deadline = asyncio.get_running_loop().time() + READY_TIMEOUT
        while not await _answers(f"{url}/v2/"):
            if exited.done() or stop.done():
                break
            if asyncio.get_running_loop().time() > deadline:
                raise ValueError(f"{PROGRAM} did not answer on {url} in {READY_TIMEOUT:.0f}s")
            await asyncio.sleep(0.05)
        else:
            if ready_file is not None:
                write_ready(ready_file, Ready(url=url, registry=f"{host}:{port}"))
        await asyncio.wait({stop, exited}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        code = await process.wait()
        stop.cancel()
    return code
