"""Running the host commands the private network needs (``ip``, ``nft``, ``wg``).

Through ``runtime/commands.py``, as the worker's own ``ip`` and runtime commands: a
machine's start runs one of these (its private address, in its namespace), and the
loop's own ``fork`` would hold every request the worker serves meanwhile.
"""

from __future__ import annotations

import subprocess

from bodega.runtime.commands import run_command


class CommandFailed(Exception):
    """A host command exited non-zero; the message carries its error output."""


async def run(*argv: str, stdin: bytes | None = None, check: bool = True,
              timeout: float | None = None) -> str:
    """``argv``'s output; ``CommandFailed`` if it fails (with ``check``) or runs longer
    than ``timeout`` seconds (it is killed)."""
    try:
        done = await run_command(*argv, stdin=stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"{' '.join(argv[:5])} did not answer within {timeout:g} s") \
            from None
    if check and done.returncode != 0:
        raise CommandFailed(f"{' '.join(argv[:5])} failed: {done.stderr.decode().strip()}")
    return done.stdout.decode()
