"""The cluster id: a short name made once per data dir, carried by every kernel object.

Network namespaces, bridges, veths, cgroups and runtime state are host-wide:
two clusters on one host (or one cluster and the leftovers of another) would
share them if their names came from the machine range alone. So each data dir
gets a random id the first time a cluster (``bodega up``) or a lone worker runs
on it, kept in ``<data dir>/cluster-id``, and every object a worker makes
carries it (``bodega.worker.host.core.names``). Sweeps then remove exactly the
objects carrying their own id and never touch anyone else's.

Five characters, a letter then letters or digits: short enough for Linux's
15-character interface names (``bv`` + id + 6 hex digits), and never all
digits, so no id is mistaken for the octets in the names older versions used.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

FILE = "cluster-id"
LENGTH = 5
PATTERN = re.compile(r"[a-z][a-z0-9]{4}")
_FIRST = "abcdefghijklmnopqrstuvwxyz"
_REST = _FIRST + "0123456789"


def new() -> str:
    return secrets.choice(_FIRST) + "".join(secrets.choice(_REST) for _ in range(LENGTH - 1))


def valid(text: str) -> bool:
    return PATTERN.fullmatch(text) is not None


def check(text: str) -> str:
    """``text`` if it is a cluster id, else a ``ValueError`` saying what one looks like."""
    if not valid(text):
        raise ValueError(f"cluster id {text!r} is not 5 characters: a lowercase letter, then "
                         "lowercase letters or digits")
    return text


def read(data_dir: Path) -> str | None:
    """The id stored in ``data_dir``; None if it has none yet."""
    try:
        text = (data_dir / FILE).read_text().strip()
    except FileNotFoundError:
        return None
    if not valid(text):
        raise ValueError(f"{data_dir / FILE} holds {text!r}, not a cluster id; remove the file "
                         "to have a new one made (objects of the old id are then no longer "
                         "swept)")
    return text


def ensure(data_dir: Path) -> str:
    """The id stored in ``data_dir``, made and stored now if it has none.

    Written to a temporary file and linked into place, so two processes racing to make
    it agree on the one that landed first, and a crash leaves no half-written id.
    """
    found = read(data_dir)
    if found is not None:
        return found
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / f".{FILE}.{os.getpid()}"
    tmp.write_text(new() + "\n")
    try:
        os.link(tmp, data_dir / FILE)
    except FileExistsError:
        pass  # another process stored its id first: use that one
    finally:
        tmp.unlink(missing_ok=True)
    stored = read(data_dir)
    assert stored is not None
    return stored
