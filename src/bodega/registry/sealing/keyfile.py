"""The keyring file: where a host keeps its cluster's gossip keys (JSON, mode 0600).

``bodega up`` makes one for a new cluster (``ensure``) and every component it
runs reads it (``--gossip-keyring``); a host that joins a cluster will write
the keyring it is handed to its own. Each daemon rewrites the file when the
cluster's keyring changes (``write``), so a component started later, or
after a restart, starts with the current keys. Several daemons of one host
may write it: each write is whole (a temporary file of its own, renamed), and
all of them write the same keyring once the rotation has reached them.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from bodega.registry.sealing.core.keyring import KEY_BYTES, GossipKey, Keyring, KeyringError

FILE_NAME = "gossip-keyring"


def read(path: Path) -> Keyring:
    """The keyring in ``path``; ``KeyringError`` (a ``ValueError``) saying what is wrong."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise KeyringError(f"no gossip keyring at {path}") from None
    except OSError as exc:
        raise KeyringError(f"cannot read the gossip keyring {path}: {exc.strerror}") from None
    try:
        return Keyring.from_json(text)
    except KeyringError as exc:
        raise KeyringError(f"{path}: {exc}") from None


def write(path: Path, keyring: Keyring) -> None:
    """Replace ``path`` with ``keyring``, readable by its owner alone, in one rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(keyring.to_json() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def ensure(path: Path) -> Keyring:
    """The keyring in ``path``, made there with one new random key if there is none."""
    if path.exists():
        return read(path)
    keyring = Keyring.of(GossipKey(secrets.token_bytes(KEY_BYTES)))
    write(path, keyring)
    return keyring


# ── what a daemon is given ───────────────────────────────────────────────────

ENV_FILE = "BODEGA_GOSSIP_KEYRING_FILE"  # the path, as --gossip-keyring takes it
ENV_JSON = "BODEGA_GOSSIP_KEYRING"  # the keyring itself, for a daemon with no file
MISSING = ("a gossip keyring is required: --gossip-keyring FILE (`bodega up` makes one in its "
           f"data dir, {FILE_NAME}), or the keyring's JSON in {ENV_JSON}")


@dataclass(frozen=True)
class KeyringSource:
    """The keyring a daemon starts with, and the file to keep it in (None: JSON was given)."""

    keyring: Keyring
    file: Path | None = None


def load(path: Path | None, json_text: str | None) -> KeyringSource:
    """The keyring from ``path`` or from ``json_text``: exactly one of them, said clearly."""
    if path is not None and json_text:
        raise KeyringError(f"give the gossip keyring once: --gossip-keyring ({ENV_FILE}) or "
                           f"{ENV_JSON}, not both")
    if path is not None:
        path = path.resolve()
        return KeyringSource(read(path), path)
    if json_text:
        try:
            return KeyringSource(Keyring.from_json(json_text))
        except KeyringError as exc:
            raise KeyringError(f"{ENV_JSON}: {exc}") from None
    raise KeyringError(MISSING)


def needed(source: KeyringSource | None) -> KeyringSource:
    """A daemon that gossips has a keyring; ``ValueError`` naming how to give one otherwise."""
    if source is None:
        raise KeyringError(MISSING)
    return source
