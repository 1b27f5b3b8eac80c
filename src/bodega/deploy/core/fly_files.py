"""fly.toml's ``[[files]]``: a file written into each machine of a group at every start.

As flyctl reads them (``internal/appconfig``'s ``File``): ``guest_path`` and exactly one
of ``local_path`` (a file read at deploy time; relative to the config's directory, where
flyctl takes it from the directory it deploys), ``raw_value`` (the file's text, which the
deploy base64-encodes) and ``secret_name`` (an app secret holding the file
base64-encoded, read by the worker at each start). ``processes`` limits an entry to those
groups; one naming none is the default group's, as flyctl flattens them. Reading a
``local_path`` is the caller's (``read``): this module does no I/O of its own.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

from pydantic import Field, model_validator

from bodega.deploy.core.fly_services import Strict
from bodega.model.limits import check_mount_path
from bodega.model.machine_config import File


class LocalFileError(ValueError):
    """A ``[[files]]`` entry's ``local_path`` that cannot be read: its index says which."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index


class TomlFile(Strict):
    guest_path: str = Field(min_length=1)
    local_path: str | None = Field(default=None, min_length=1)
    raw_value: str | None = None
    secret_name: str | None = Field(default=None, min_length=1)
    processes: list[str] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TomlFile:
        check_mount_path(self.guest_path, "guest_path")
        given = [k for k in ("local_path", "raw_value", "secret_name")
                 if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"file {self.guest_path}: give exactly one of local_path, "
                             f"raw_value and secret_name, not {len(given) or 'none'}")
        return self

    def machine_file(self, index: int, base_dir: Path | None,
                     read: Callable[[Path], bytes]) -> File:
        """The Machines API's file: its bytes base64 (a local file read now), or the
        secret's name."""
        if self.secret_name is not None:
            return File(guest_path=self.guest_path, secret_name=self.secret_name)
        if self.local_path is not None:
            path = Path(self.local_path)
            path = base_dir / path if base_dir is not None else path
            try:
                data = read(path)
            except OSError as exc:
                raise LocalFileError(index, f"file {self.guest_path}: cannot read local_path "
                                     f"{path}: {exc.strerror or exc}") from None
        else:
            data = (self.raw_value or "").encode()
        file = File(guest_path=self.guest_path, raw_value=base64.b64encode(data).decode())
        file.check()
        return file
