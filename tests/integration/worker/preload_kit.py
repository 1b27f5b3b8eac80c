"""A library that says who loaded it: for a machine's ``LD_PRELOAD``.

Built with the host's C compiler into a directory every user can read. Whenever the
dynamic loader loads it into a process, it appends that process's effective uid and
executable to its marker file (open to every user), so a test reads which processes,
as whom, were given a machine's environment.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCE = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void mark(void) {
    char exe[256] = "?", line[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) exe[n] = 0;
    int fd = open(MARKER, O_WRONLY | O_APPEND);
    if (fd < 0) return;
    int len = snprintf(line, sizeof line, "%d %s\n", (int)geteuid(), exe);
    if (len > 0) write(fd, line, len);
    close(fd);
}
"""


@dataclass(frozen=True)
class MarkingLibrary:
    path: Path
    marker: Path

    def loaded_by(self) -> list[tuple[int, str]]:
        """(effective uid, executable) of each process the library was loaded into."""
        lines = self.marker.read_text().splitlines()
        return [(int(uid), exe) for uid, exe in (line.split(" ", 1) for line in lines)]


@contextlib.contextmanager
def marking_library() -> Iterator[MarkingLibrary]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the preloaded library with")
    # Not pytest's tmp_path: it is closed to the machine's user, who loads it too.
    where = Path(tempfile.mkdtemp(prefix="bodega-preload-"))
    try:
        where.chmod(0o755)
        marker = where / "loaded"
        marker.touch()
        marker.chmod(0o666)
        source, library = where / "mark.c", where / "libmark.so"
        source.write_text(SOURCE)
        subprocess.run([compiler, "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o",
                        str(library), str(source)], check=True, capture_output=True)
        library.chmod(0o755)
        yield MarkingLibrary(library, marker)
    finally:
        shutil.rmtree(where, ignore_errors=True)
