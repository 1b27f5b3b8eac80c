"""How an exec enters a running process machine: where its program runs, and nowhere else.

An exec is how a machine is looked into, so it sees what the machine's program
sees: its namespaces (the mount namespace, where its volume and its
``/etc/resolv.conf`` are bound, and the network namespace), its cgroups (it is
counted, limited and frozen with the machine), its user, its working directory
and its environment. Three steps, each doing only what it must where it runs::

    sh ENTER  root, the worker's namespaces, no environment but PATH: joins the
              machine's cgroups, opens the file of the machine's variables as fd 3
    nsenter   root: enters the namespaces, root and working directory of the
              machine's wrapper, then takes the machine's uid and gid with no
              other groups, all before it runs anything there
    sh LOAD   the machine's user, in the machine: ``ulimit -v`` where there are no
              cgroups, exports the machine's variables from fd 3, runs ``"$@"``

Nothing runs as root in the machine's mount namespace: a machine may bind its
volume over ``/usr/bin``, and a root process there would run the volume's files.
Nothing that runs as root sees the machine's variables either (an ``LD_PRELOAD``
among them would load the machine's library into it): they reach only the
machine's own user, as a file of ``export`` lines of ``shlex``-quoted literals
(a memfd, never on disk: it holds the app's secrets). Only names a shell can
export are in it; the program is started by a shell too (``launch.py``), which
drops the others, so the program never has them either.

What is entered is named by files the worker holds open, as
``/proc/<worker>/fd/<n>`` (only root can open those): opened from
``/proc/<wrapper>/...``, then the run's identity is checked again, so a wrapper
that ended meanwhile, and a stranger that took its pid, cannot hand an exec the
wrong namespaces. Nothing of the client's request is parsed by a shell: its argv
is only ever ``"$@"``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from bodega.worker.drivers.base import TaskGone
from bodega.worker.drivers.process.launch import SHELL, environment_script, memory_fd

EXEC_NAME = "bodega-exec"
# What ``nsenter`` enters when it is run only to take a user: the UTS namespace it is in
# already (nothing changes). util-linux 2.41 and later refuse an nsenter with no namespace.
OWN_NAMESPACE = "--uts=/proc/self/ns/uts"
# /proc/<pid>/ns entries, with the nsenter option that enters each.
NAMESPACE_OPTIONS = (
    ("user", "--user"), ("cgroup", "--cgroup"), ("ipc", "--ipc"), ("uts", "--uts"),
    ("net", "--net"), ("pid", "--pid"), ("mnt", "--mount"), ("time", "--time"),
)

# $1 cgroup.procs files (space-separated, "-" for none), $2 the file of the machine's
# variables, then the rest of the command (nsenter's, or LOAD's when nothing is entered).
ENTER = r"""set -f
cgs=$1 envf=$2
shift 2
if [ "$cgs" != - ]; then for cg in $cgs; do echo $$ > "$cg" || exit 126; done; fi
exec 3< "$envf"
exec "$@"
"""
# $1 memory limit in KiB for ulimit -v ("-" for none), then the client's argv.
LOAD = r"""memkb=$1
shift
if [ "$memkb" != - ]; then ulimit -v "$memkb" || exit 126; fi
unset PATH memkb
. /proc/self/fd/3
exec 3<&-
exec "$@"
"""


@dataclass(frozen=True)
class HeldFiles:
    """What an exec enters, named by paths of files the worker holds open (only root can
    open ``/proc/<worker>/fd/<n>``)."""

    namespaces: tuple[tuple[str, str], ...]  # (nsenter option, path): those not the worker's
    root: str
    cwd: str
    environment: str  # the file of the machine's variables (``environment_script``)


@dataclass(frozen=True)
class Entry:
    """Where an exec goes."""

    files: HeldFiles
    cgroup_procs: tuple[Path, ...] = ()
    user: tuple[int, int] | None = None  # None keeps the worker's
    memory_kib: int | None = None  # ulimit -v, where there are no cgroups to limit it

    @property
    def enters(self) -> bool:
        """Something is left for nsenter to do: a namespace to enter, or a user to become."""
        return bool(self.files.namespaces) or self.user is not None


def entry_argv(entry: Entry, argv: list[str]) -> list[str]:
    """The exec's full command: ENTER [nsenter ...] LOAD argv. Run it in ``files.cwd``
    (the working directory, when there is nothing to enter) with ``ROOT_ENV``."""
    files = entry.files
    enter: list[str] = []
    if entry.enters:
        # A user to become with no namespace to enter (a machine on the host's network):
        # nsenter enters its own UTS namespace, as newer ones refuse to enter none.
        namespaces = ([f"{option}={path}" for option, path in files.namespaces]
                      or [OWN_NAMESPACE])
        enter = ["nsenter", *namespaces, f"--root={files.root}", f"--wd={files.cwd}"]
        if entry.user is not None:
            enter += ["--setuid", str(entry.user[0]), "--setgid", str(entry.user[1])]
        enter.append("--")
    return [
        SHELL, "-c", ENTER, EXEC_NAME,
        " ".join(str(p) for p in entry.cgroup_procs) or "-", files.environment,
        *enter, SHELL, "-c", LOAD, EXEC_NAME,
        str(entry.memory_kib) if entry.memory_kib else "-",
        *argv,
    ]


@contextlib.contextmanager
def held_files(pid: int, env: Mapping[str, str]) -> Iterator[HeldFiles]:
    """Open the namespaces (those not the worker's own), root and working directory of
    the process ``pid``, and a memfd of ``env``; closed on the way out.

    TaskGone when ``pid`` has no such files (it has ended). That they are still the run's
    is the caller's to check, after: the pid may have been taken by another since.
    """
    fds: list[int] = []

    def hold(fd: int) -> str:
        fds.append(fd)
        return f"/proc/{os.getpid()}/fd/{fd}"

    try:
        try:
            files = HeldFiles(_namespaces(pid, hold),
                              hold(os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)),
                              hold(os.open(f"/proc/{pid}/cwd", os.O_RDONLY | os.O_DIRECTORY)),
                              hold(memory_fd(environment_script(env))))
        except OSError as exc:
            raise TaskGone(f"process {pid} has ended ({exc.strerror})") from exc
        yield files
    finally:
        for fd in fds:
            os.close(fd)


def _namespaces(pid: int, hold: Callable[[int], str]) -> tuple[tuple[str, str], ...]:
    """(nsenter option, held path) of each namespace of ``pid`` not the worker's own."""
    namespaces = []
    for name, option in NAMESPACE_OPTIONS:
        try:
            own = os.stat(f"/proc/self/ns/{name}")
        except FileNotFoundError:
            continue  # a kind this kernel does not have
        fd = os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY)
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
            os.close(fd)  # the worker's own: the exec is in it already
            continue
        namespaces.append((option, hold(fd)))
    return tuple(namespaces)


@contextlib.contextmanager
def memory_file(text: str) -> Iterator[str]:
    """A path only root can open, of a file in memory holding ``text`` (never on disk: it
    may hold an app's secrets), until the way out."""
    fd = memory_fd(text)
    try:
        yield f"/proc/{os.getpid()}/fd/{fd}"
    finally:
        os.close(fd)
