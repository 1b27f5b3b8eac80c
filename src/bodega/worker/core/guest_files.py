"""What a start writes into a machine: its ``config.files`` with their bytes; pure.

Each start builds the list again (``guest_files``): a ``raw_value`` is decoded, a
``secret_name`` is looked up in the app's secrets as they are at this start and decoded
(the secret holds the file base64-encoded, as on Fly), so a secret's value lives in
memory and in the machine's root only, never in its config, its ops or its events. A
secret that is missing or not base64 refuses the start (``FilesRefused``), said by name
only. The drivers write the list: into the container's own root (``oci/guest_files.py``)
or through a vm's init (``vm/core/config.py``). A machine's root outlives its runs (a
container's upper layer, a vm's disk), so a file the last start wrote that this one does
not (its entry gone from the config) is removed (``dropped``), as a fresh root would
not have it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bodega.model.machine_config import File, decode_base64

DEFAULT_MODE = 0o644  # a file's mode when its config gives none, as on Fly


@dataclass(frozen=True)
class GuestFile:
    """One file to write: where in the machine, its bytes, its mode (chmod's)."""

    guest_path: str
    data: bytes
    mode: int = DEFAULT_MODE

    def __repr__(self) -> str:  # its bytes may be a secret's: never in a log
        return f"GuestFile({self.guest_path!r}, {len(self.data)} bytes, {self.mode:o})"


class FilesRefused(ValueError):
    """A file this start cannot write: the reason, naming the file and secret only."""


def guest_files(files: Sequence[File], secrets: Mapping[str, str]) -> tuple[GuestFile, ...]:
    """The files of a start, in the config's order; ``FilesRefused`` when one cannot be
    made (its secret missing or not base64, a raw value not base64)."""
    out = []
    for file in files:
        what = f"file {file.guest_path}"
        try:
            if file.secret_name is not None:
                value = secrets.get(file.secret_name)
                if value is None:
                    raise FilesRefused(f"{what}: the app has no secret {file.secret_name} "
                                       "(set it with `bodega secrets set`)")
                data = decode_base64(value, f"{what}: secret {file.secret_name}")
            else:
                data = file.content()
        except FilesRefused:
            raise
        except ValueError as exc:
            raise FilesRefused(f"{exc} (a file's value is its bytes base64-encoded)") from None
        out.append(GuestFile(file.guest_path, data,
                             DEFAULT_MODE if file.mode is None else file.mode))
    return tuple(out)


def dropped(before: Sequence[str], files: Sequence[GuestFile]) -> tuple[str, ...]:
    """The paths an earlier start wrote (``before``) that this one's ``files`` do not."""
    now = {file.guest_path for file in files}
    return tuple(dict.fromkeys(path for path in before if path not in now))
