"""The admin API token of a cluster ``bodega up`` runs: given, kept, or made once."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def admin_token(data_dir: Path, given: str | None) -> tuple[str, bool]:
    """The admin token: as given, else the one this data dir already has, else a new one.

    It is kept in ``api-token`` (mode 0600) so `bodega apps ...` run beside the
    cluster finds it without being told. Returns (token, whether it was made here).
    """
    path = data_dir / "api-token"
    if given:
        _write_private(path, given)
        return given, False
    if path.exists() and path.read_text().strip():
        return path.read_text().strip(), False
    token = secrets.token_urlsafe(24)
    _write_private(path, token)
    return token, True


def _write_private(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    os.replace(tmp, path)
