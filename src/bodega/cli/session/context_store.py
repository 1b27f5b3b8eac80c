"""The contexts file on disk, and the local files a target's token and API URL come from.

The file is ``$BODEGA_CONFIG`` if set, else ``$XDG_CONFIG_HOME/bodega/config.toml``
(``~/.config/bodega/config.toml`` without XDG_CONFIG_HOME). It holds tokens, so it
is written 0600 in a directory made 0700, replaced atomically, and changed under
a lock: two ``bodega up`` starting at once both get their context.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from bodega.cli.session.core.contexts import ContextError, Contexts, parse, render
from bodega.cli.session.core.target import HereCluster


def config_path(environ: Mapping[str, str]) -> Path:
    if environ.get("BODEGA_CONFIG"):
        return Path(environ["BODEGA_CONFIG"])
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "bodega" / "config.toml"


def load(path: Path) -> Contexts:
    """The contexts in ``path``; none if it does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return Contexts()
    except OSError as exc:
        raise ContextError(f"cannot read {path}: {exc.strerror}") from None
    return parse(text, str(path))


def update(path: Path, edit: Callable[[Contexts], Contexts]) -> Contexts:
    """Read, change and write the file back, holding its lock; returns what was written."""
    with _locked(path):
        changed = edit(load(path))
        _write_private(path, render(changed))
    return changed


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    _private_parent(path)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _private_parent(path: Path) -> None:
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o600)  # O_CREAT's mode is cut by the umask; never widened by it
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_token(path: str) -> str | None:
    """The token a file holds (stripped), or None if it cannot be read or is empty."""
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def here_cluster(data_dir: str) -> HereCluster | None:
    """The cluster a ``bodega up`` ran from ``data_dir``: its ``cluster.json``'s API URL."""
    try:
        state = json.loads((Path(data_dir) / "cluster.json").read_text())
    except (OSError, ValueError):
        return None
    url = state.get("api_url") if isinstance(state, dict) else None
    if not isinstance(url, str) or not url:
        return None
    return HereCluster(data_dir, url, os.path.join(data_dir, "api-token"))


def shown(path: str) -> str:
    """A path as a person here reads it: relative to the working directory when inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
