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
globbing off (``set -f``), so a ``*`` in a path stays a ``*``. A volume
is handed to the machine's own user before it is mounted (each machine runs
as its own uid: ``bodega.worker.identity``), once: only when it is owned by
someone else, e.g. fresh or last used by another machine. A Python shim would do
the same job at about 10 ms of interpreter start per machine; dash costs
under 1 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SHELL = "/bin/sh"

# Positional parameters: $1 cgroup.procs files (space-separated, "-" for none),
# $2 pidfile, $3 exit file, $4 uid:gid ("-" to keep the worker's), $5 memory
# limit in KiB for ulimit -v ("-" for none), $6 bind mounts "host=guest ..."
# ("-" for none), then the program's argv.
WRAPPER = r"""set -f
cgs=$1 pidf=$2 exitf=$3 user=$4 memkb=$5 mounts=$6
shift 6
fail() { echo 125 > "$exitf"; exit 125; }
if [ "$cgs" != - ]; then for cg in $cgs; do echo $$ > "$cg" || fail; done; fi
if [ "$mounts" != - ]; then
  for m in $mounts; do
    if [ "$user" != - ] && [ "$(stat -c %u:%g "${m%%=*}")" != "$user" ]; then
      chown -R "$user" "${m%%=*}" || fail
    fi
    mkdir -p "${m#*=}" && mount --bind "${m%%=*}" "${m#*=}" || fail
  done
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
"""
PROGRAM_NAME = "bodega-machine"


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
) -> list[str]:
    """The full command: [nsenter] [unshare] sh -c WRAPPER bodega-machine ... -- argv."""
    for host, guest in mounts:
        for part in (str(host), guest):
            if any(c.isspace() for c in part) or "=" in part:
                raise ValueError(f"mount paths may not contain spaces or '=': {part!r}")
    prefix: list[str] = []
    if netns is not None:
        prefix += ["nsenter", f"--net=/run/netns/{netns}", "--"]
    if mounts:
        prefix += ["unshare", "--mount", "--propagation", "private", "--"]
    return [
        *prefix, SHELL, "-c", WRAPPER, PROGRAM_NAME,
        " ".join(str(p) for p in cgroup_procs) or "-",
        str(files.pidfile), str(files.exitfile),
        f"{user[0]}:{user[1]}" if user else "-",
        str(memory_kib) if memory_kib else "-",
        " ".join(f"{host}={guest}" for host, guest in mounts) or "-",
        *argv,
    ]


def parse_exit_file(text: str) -> int | None:
    """The status the wrapper wrote, or None if the file is empty or garbled."""
    text = text.strip()
    if not text.isdigit():
        return None
    return int(text)
