"""What a machine config and its metadata may hold: counts, sizes and characters.

A request body is at most 1 MiB (``bodega.wire.transport.http.MAX_BODY``); these bound
its parts. A machine's config travels in its registry row, which peers refuse
over 64 KiB, so a config is kept well under that; env and metadata keys
become process environments and labels, where NUL cannot be represented and
control characters only do harm.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

MAX_ENV = 256
MAX_METADATA = 128
MAX_ITEMS = 64  # services, processes, checks, files: a config lists a handful
MAX_KEY = 256
MAX_CONFIG_BYTES = 48 * 1024  # leaves room for the rest of the machine's registry row
MAX_SWAP_MB = 64 * 1024  # init.swap_size_mb: 64 GB; a size in bytes by mistake is refused
# A file written into a machine (``config.files``) travels base64 in its config, so the
# config's own bound is every file's total; one file is at most 32 KiB as written.
MAX_FILE_BYTES = 32 * 1024


def check_text_map(what: str, mapping: Mapping[str, str | None], limit: int, *,
                   env: bool = False) -> None:
    """Raise ``ValueError`` saying what is wrong with an env or metadata map."""
    if len(mapping) > limit:
        raise ValueError(f"at most {limit} {what} entries, not {len(mapping)}")
    for key, value in mapping.items():
        if not key or len(key) > MAX_KEY or not key.isprintable():
            raise ValueError(f"{what} key {key[:40]!r}: 1-{MAX_KEY} printable characters")
        if env and "=" in key:
            raise ValueError(f"{what} key {key[:40]!r}: an environment name cannot hold '='")
        if value is not None and "\x00" in value:
            raise ValueError(f"{what} value of {key[:40]!r} holds a NUL character")


MAX_PATH = 256


def check_mount_path(path: str, what: str = "mount path") -> None:
    """A volume's mount point (or a file's ``guest_path``): absolute and plain, since a
    worker makes and binds (or writes) it."""
    parts = path.split("/")
    if not path.startswith("/") or path == "/" or len(path) > MAX_PATH:
        raise ValueError(f"{what} {path[:40]!r}: an absolute path below /, at most "
                         f"{MAX_PATH} characters")
    if any(part in (".", "..") for part in parts) or not path.isprintable() \
            or any(c.isspace() or c == "=" for c in path):
        raise ValueError(f"{what} {path[:40]!r}: no '.' or '..' steps, spaces, '=' "
                         "or control characters")


def check_static_path(what: str, path: str) -> None:
    """A static's ``guest_path`` or ``url_prefix``: absolute, with no '.' or '..' step and
    no spaces or control characters (a prefix is a key of the edge's maps)."""
    if not path.startswith("/"):
        raise ValueError(f"{what} {path[:40]!r}: must start with '/'")
    if any(part in (".", "..") for part in path.split("/")) or not path.isprintable() \
            or any(c.isspace() for c in path):
        raise ValueError(f"{what} {path[:40]!r}: no '.' or '..' steps, spaces or control "
                         "characters")


def check_config_size(wire: Mapping[str, object]) -> None:
    size = len(json.dumps(wire, separators=(",", ":")))
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"the config is {size} bytes of JSON; at most {MAX_CONFIG_BYTES}")


def check_metadata_key(key: str) -> None:
    """A key that travels as a path segment (``.../metadata/{key}``) to the worker."""
    check_text_map("metadata", {key: None}, 1)
    if key in (".", ".."):
        raise ValueError(f"metadata key {key!r} is a path step, not a name")
