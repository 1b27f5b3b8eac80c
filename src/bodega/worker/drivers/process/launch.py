"""How the process driver starts a machine: a fixed wrapper script and its argv.

The wrapper is a short POSIX sh script that stays as the parent of the
machine's program. It joins the machine's cgroups before the program exists,
records its own pid, survives the signals sent to the machine's process
group (its trap runs only once the program has ended), runs the program, and
writes the program's exit status to a file. That file is how an exit that
happens while the worker is down is still known exactly when it comes back.

The client's argv is only ever passed as positional parameters and run as
``"$@"``: nothing a client sends is parsed by a shell. The mount list is
split on spaces (paths with spaces or ``=`` are refused before) with
globbing off (``set -f``), so a ``*`` in a path stays a ``*``. A guest path
that exists (a file: the private network's ``/etc/resolv.conf``) is bound
over as it is; a missing one is made as a directory. A mount's source is
already the machine's own user's (each machine runs as its own uid:
``bodega.worker.host.identity``) when the wrapper runs: the driver hands it over
before the spawn (``hand_over``), so the wrapper spawns nothing but ``mount``
per mount. A Python shim would do the wrapper's job at about 10 ms of
interpreter start per machine; dash costs under 1 ms.

A machine that runs as its own user starts in its own directory, seen at
``HOME_MOUNT``: the worker's data dir is 0700 (it holds every app's configs),
so the machine's directory inside it is unreachable by path for that user
(a program that resolves its working directory, as ``python3 -m http.server``
does, would find nothing). The wrapper bind-mounts the directory at
``HOME_MOUNT`` in the machine's own mount namespace and starts there: every
machine sees its own directory at that one path, and none sees another's.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from bodega.worker.drivers.base import TaskSpec

SHELL = "/bin/sh"
# Where a machine that runs as its own user finds its directory (its working directory).
# An empty directory on the host; each machine's mount namespace binds its own over it.
HOME_MOUNT = Path("/run/bodega/home")

# Positional parameters: $1 cgroup.procs files (space-separated, "-" for none),
# $2 pidfile, $3 exit file, $4 uid:gid ("-" to keep the worker's), $5 memory
# limit in KiB for ulimit -v ("-" for none), $6 bind mounts "host=guest ..."
# ("-" for none), $7 the machine's directory to bind at HOME_MOUNT and start in ("-": start
# where the wrapper was started; "@": a parked launcher bound it already), then the
# program's argv.
WRAPPER = r"""set -f
cgs=$1 pidf=$2 exitf=$3 user=$4 memkb=$5 mounts=$6 home=$7
shift 7
fail() { echo 125 > "$exitf"; exit 125; }
if [ "$cgs" != - ]; then for cg in $cgs; do echo $$ > "$cg" || fail; done; fi
if [ "$mounts" != - ]; then
  for m in $mounts; do
    { [ -e "${m#*=}" ] || mkdir -p "${m#*=}"; } && mount --bind "${m%%=*}" "${m#*=}" || fail
  done
fi
if [ "$home" != - ]; then
  if [ "$home" != @ ]; then mount --bind "$home" HOME_MOUNT || fail; fi
  cd HOME_MOUNT || fail
  unset OLDPWD  # the host's path of the directory: not the machine's to see
fi
echo $$ > "$pidf"
trap : HUP INT QUIT TERM USR1 USR2
if [ "$memkb" != - ]; then ulimit -v "$memkb" || fail; fi
if [ "$user" = - ]; then
  "$@"
else
  setpriv --reuid="${user%%:*}" --regid="${user#*:}" --clear-groups -- "$@"
fi
echo $? > "$exitf"
""".replace("HOME_MOUNT", shlex.quote(str(HOME_MOUNT)))
PROGRAM_NAME = "bodega-machine"
# A name a shell can export: the only ones the wrapper passes on to its program.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class RunFiles:
    """The per-start files: named by instance and start number, so each run has its own.

    ``spawnfile`` is created just before the wrapper is spawned. Its absence
    proves the run never started, so the common first start spawns at once;
    its presence means an earlier attempt may have spawned the wrapper (a
    worker killed between the two), and the driver looks for that run before
    starting another.
    """

    pidfile: Path
    exitfile: Path
    spawnfile: Path

    @classmethod
    def for_run(cls, machine_dir: Path, instance_id: str, start_seq: int) -> RunFiles:
        run = machine_dir / "run"
        stem = f"{instance_id}-{start_seq}"
        return cls(run / f"{stem}.pid", run / f"{stem}.exit", run / f"{stem}.spawn")


def wrapper_argv(
    argv: list[str],
    files: RunFiles,
    *,
    cgroup_procs: list[Path],
    user: tuple[int, int] | None,
    memory_kib: int | None,
    mounts: list[tuple[Path, str]],
    netns: str | None,
    home: Path | None = None,
) -> list[str]:
    """The full command: [nsenter] [unshare] sh -c WRAPPER bodega-machine ... -- argv.

    ``home``: the machine's directory, bound at ``HOME_MOUNT`` for it to start in (a
    machine running as its own user); None starts it in the wrapper's working directory.
    """
    for host, guest in mounts:
        for part in (str(host), guest):
            if any(c.isspace() for c in part) or "=" in part:
                raise ValueError(f"mount paths may not contain spaces or '=': {part!r}")
    prefix: list[str] = []
    if netns is not None:
        prefix += ["nsenter", f"--net=/run/netns/{netns}", "--"]
    if mounts or home is not None:
        prefix += ["unshare", "--mount", "--propagation", "private", "--"]
    return [
        *prefix, SHELL, "-c", WRAPPER, PROGRAM_NAME,
        " ".join(str(p) for p in cgroup_procs) or "-",
        str(files.pidfile), str(files.exitfile),
        f"{user[0]}:{user[1]}" if user else "-",
        str(memory_kib) if memory_kib else "-",
        " ".join(f"{host}={guest}" for host, guest in mounts) or "-",
        str(home) if home is not None else "-",
        *argv,
    ]


def handed_over(source: Path, user: tuple[int, int]) -> bool:
    """The mount's source is already the machine's user's (its top says for the tree)."""
    top = source.lstat()
    return (top.st_uid, top.st_gid) == user


def hand_over(source: Path, user: tuple[int, int]) -> None:
    """Give a mount's source to the machine's user: the whole tree, its top last, so a walk
    cut short is redone at the next start. Links are changed, never followed: a link a
    machine left in its volume cannot hand it a file outside."""
    for directory, dirs, files in os.walk(source):
        for name in (*dirs, *files):
            os.chown(os.path.join(directory, name), *user, follow_symlinks=False)
    os.chown(source, *user, follow_symlinks=False)  # last: a walk cut short is redone


def home(machine_dir: Path, own_user: bool) -> Path | None:
    """The directory a machine's program starts in, bound for it at ``HOME_MOUNT`` when it
    runs as its own user; None when it runs as the worker's, which reaches it by path."""
    return machine_dir / "root" if own_user else None


def home_of(spec: TaskSpec) -> Path | None:
    """``home`` for ``spec``'s program."""
    return home(spec.machine_dir, spec.user is not None)


def parse_exit_file(text: str) -> int | None:
    """The status the wrapper wrote, or None if the file is empty or garbled."""
    text = text.strip()
    if not text.isdigit():
        return None
    return int(text)
