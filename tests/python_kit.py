"""The Python a test's machine runs: one the machine's own user can execute.

A machine's program (and an exec's command) is exec'd by the machine's user with no
capabilities, so the interpreter running the tests will not do where it sits under a
directory closed to other users (a pyenv under /root, mode 0700): the host's python3
(Debian's, which ``scripts/host-packages`` installs) does. The tests themselves, and the
bodega they start (``python -m bodega``), keep ``sys.executable``.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

HOST_PYTHON = Path("/usr/bin/python3")


@functools.cache
def machine_python() -> str:
    """The host's python3, else this interpreter if every user can run it."""
    for candidate in (HOST_PYTHON, Path(sys.executable)):
        if runnable_by_anyone(candidate):
            return str(candidate)
    raise RuntimeError(f"no Python a machine's user can run: neither {HOST_PYTHON} nor "
                       f"{sys.executable}; install python3 (scripts/host-packages)")


def runnable_by_anyone(path: Path) -> bool:
    """Execute on the file, and search on every directory on its way (as given, and where
    its links lead), for users other than its owner and group."""
    try:
        real = path.resolve(strict=True)
        directories = {*path.parents, *real.parents}
        return (real.is_file() and bool(os.stat(real).st_mode & 0o001)
                and all(os.stat(d).st_mode & 0o001 for d in directories))
    except OSError:
        return False
