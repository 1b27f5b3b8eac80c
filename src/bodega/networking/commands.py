"""Running the host commands the private network needs (``ip``, ``nft``, ``wg``)."""

from __future__ import annotations

import asyncio


class CommandFailed(Exception):
    """A host command exited non-zero; the message carries its error output."""


async def run(*argv: str, stdin: bytes | None = None, check: bool = True) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate(stdin)
    if check and process.returncode != 0:
        raise CommandFailed(f"{' '.join(argv[:5])} failed: {err.decode().strip()}")
    return out.decode()
