"""Running the host commands the private network needs (``ip``, ``nft``, ``wg``).

Through ``runtime/commands.py``, as the worker's own ``ip`` and runtime commands: a
machine's start runs one of these (its private address, in its namespace), and the
loop's own ``fork`` would hold every request the worker serves meanwhile.
"""

from __future__ import annotations

from bodega.runtime.commands import run_command


class CommandFailed(Exception):
    """A host command exited non-zero; the message carries its error output."""


async def run(*argv: str, stdin: bytes | None = None, check: bool = True) -> str:
    done = await run_command(*argv, stdin=stdin)
    if check and done.returncode != 0:
        raise CommandFailed(f"{' '.join(argv[:5])} failed: {done.stderr.decode().strip()}")
    return done.stdout.decode()
