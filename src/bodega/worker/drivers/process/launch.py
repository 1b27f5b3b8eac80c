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
``bodega.worker.host.core.identity``) when the wrapper runs: the driver hands it over
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

What runs as root never runs the machine's choices. The machine's variables
(its config's, chosen by whoever holds an app token: an ``LD_PRELOAD`` among
them would be loaded by every root process given it) reach only the last
step, which already runs as the machine's user; the steps before run with
``ROOT_ENV`` alone. They come inside that step, a script the wrapper is given
as its stdin (a memfd, or a parked launcher's here-document: memory, never a
file, nor a command line, which any user may read)::

    sh WRAPPER  root, PATH only: cgroups, the machine's directory, pid and exit files
      ├─ BIND   root: waits at the gate, then binds the mounts (the volume last)
      └─ unshare --setuid --setgid  (no other groups, no capabilities from here on)
           sh -s  the program's step, as the machine's user with no capabilities: opens
                  the gate, waits for the binds, exports the variables, execs ``"$@"``

The order is the other half. The mounts bind what the machine owns (its volume may be
bound over ``/usr/bin``, or ``/etc`` with an ``ld.so.preload`` in it), and a root process
exec'd in that namespace afterwards would load the machine's files: an absolute path
resolved beforehand would not help (the bind shadows it, and the libraries the loader
looks for), so nothing is exec'd as root after them. ``unshare`` and the shell it runs are
loaded first; that shell, the machine's user's, opens the gate (a FIFO of the run); only
then does ``BIND``, the wrapper's other child, run ``mount``. Its ``mount`` of the volume
is the last root exec in the namespace, which is why the one directory goes after the
files (``bind_order``). The step reads ``bound`` from ``BIND`` before it runs the program,
so the program starts with every mount in place, and ``BIND`` writes the pidfile once they
are (an exec waits for it). The pid and exit files are opened before any of it: the
wrapper writes them through those descriptors, never by a path the volume could shadow.

The program is exec'd by that step, a process of the machine's user with no capabilities
left: the kernel checks its path as it does for that user, so a program in a directory
closed to the user cannot run (``program.py`` says so before the start).

The user is taken by ``unshare`` with no namespace to make (``--setuid``/``--setgid``:
numeric ids, no name looked up; supplementary groups dropped, and it stops if it cannot
drop them). Its ``setuid`` as root clears every capability before it execs the step's
shell. The exec path takes the user with the ``nsenter`` that enters the machine's
namespaces (``entry.py``). A worker whose user namespace denies ``setgroups`` refuses to run
machines as their own users at all, in one line at its start (``ops/effects.py``,
``machine_user``), rather than have each start fail.
Each way of taking the user was timed (``bench/machines/user_switch.py``, ``docs/benchmarks.md``):
``setpriv`` looks each number up as a user name first (NSS loads ``libnss_systemd`` and the
libraries it needs) and reads the locale; Debian's ``nsenter`` loads ``libselinux`` and
``libpcre2`` and looks for SELinux, and has to enter a namespace (util-linux 2.41 and later
refuse one with none); ``unshare`` loads libc alone and makes one ``unshare(0)`` call.
``--setuid``/``--setgid`` came to ``unshare`` in util-linux 2.34: an older one makes the
worker refuse machine users at its start (``machine_user``).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bodega.worker.drivers.base import DriverError, Mount, TaskSpec

SHELL = "/bin/sh"
# Where a machine that runs as its own user finds its directory (its working directory).
# An empty directory on the host; each machine's mount namespace binds its own over it.
HOME_MOUNT = Path("/run/bodega/home")
# The whole environment of what runs as root before a machine's program (and of an exec's
# steps that do): the host's commands are found on it, nothing of the machine's is in it.
ROOT_ENV = {"PATH": os.defpath}
PROGRAM_NAME = "bodega-machine"
# A machine's directory: where its program starts (``home``), its log, its run files.
MACHINE_DIRS = ("root", "logs", "run")
# How the wrapper takes the machine's user ($user is uid:gid) before the command after it.
USER_SWITCH = 'unshare --setuid="${user%%:*}" --setgid="${user#*:}" --'
# A name a shell can export: the only ones the wrapper passes on to its program.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The machine's user's step (``program_step``), read by ``sh -s`` from its stdin: $1 the
# gate ("-" for none: nothing to bind), then the program's argv. With a gate, fd 4 is the
# gate's writing end and fd 7 what BIND says once the mounts are bound. Its stdin is the
# script itself, so the program gets /dev/null.
STEP_HEAD = r"""gate=$1
shift
if [ "$gate" != - ]; then
  echo go >&4 && exec 4>&- && read -r bound <&7 && [ "$bound" = bound ] || exit 125
  exec 7<&-
fi
unset PATH OLDPWD gate bound
"""
STEP_TAIL = 'exec "$@" </dev/null\n'
# Positional parameters: $1 cgroup.procs files (space-separated, "-" for none),
# $2 pidfile, $3 exit file, $4 uid:gid ("-" to keep the worker's), $5 memory
# limit in KiB for ulimit -v ("-" for none), $6 bind mounts "host=guest ..."
# ("-" for none), $7 the machine's directory to bind at HOME_MOUNT and start in ("-": start
# where the wrapper was started; "@": a parked launcher bound it already), $8 the gate, a
# FIFO ("-" with no mounts), $9 "0": stdin is the program's step, which runs the program
# ("-": run it as it is, in the wrapper's environment: an image machine's runtime, which
# gives its container its own), then the program's argv.
WRAPPER = r"""set -f
cgs=$1 pidf=$2 exitf=$3 user=$4 memkb=$5 mounts=$6 home=$7 gate=$8 step=$9
shift 9
exec 3<&0 </dev/null 5>>"$exitf" 6>"$pidf"
fail() { echo 125 >&5; exit 125; }
if [ "$cgs" != - ]; then for cg in $cgs; do echo $$ > "$cg" || fail; done; fi
if [ "$home" != - ]; then
  if [ "$home" != @ ]; then mount --bind "$home" @HOME_MOUNT@ || fail; fi
  cd @HOME_MOUNT@ || fail
  unset OLDPWD  # the host's path of the directory: not the machine's to see
fi
if [ "$memkb" != - ]; then ulimit -v "$memkb" || fail; fi
if [ "$step" != - ]; then set -- @SHELL@ -s -- "$gate" "$@"; fi
if [ "$user" != - ]; then
  set -- @USER_SWITCH@ "$@"
fi
if [ "$gate" = - ]; then
  echo $$ >&6
  trap : HUP INT QUIT TERM USR1 USR2
  "$@" <&3 3<&- 5>&- 6>&-
else
  trap : HUP INT QUIT TERM USR1 USR2
  {
    read -r go <&4 && [ "$go" = go ] || exit 125
    for m in $mounts; do
      { [ -e "${m#*=}" ] || mkdir -p "${m#*=}"; } && mount --bind "${m%%=*}" "${m#*=}" || exit 125
    done >&2
    echo $$ >&6 && echo bound
  } 3<&- 4<"$gate" 5>&- | "$@" 4>"$gate" 7<&0 <&3 3<&- 5>&- 6>&-
fi
echo $? >&5
""".replace("@HOME_MOUNT@", shlex.quote(str(HOME_MOUNT))).replace("@SHELL@", SHELL).replace(
    "@USER_SWITCH@", USER_SWITCH)


@dataclass(frozen=True)
class RunFiles:
    """The per-start files: named by instance and start number, so each run has its own.

    ``spawnfile`` is created just before the wrapper is spawned. Its absence
    proves the run never started, so the common first start spawns at once;
    its presence means an earlier attempt may have spawned the wrapper (a
    worker killed between the two), and the driver looks for that run before
    starting another. ``gate`` is the FIFO through which the program's step
    lets the mounts be bound (``make_gate``), for a run that has any.
    """

    pidfile: Path
    exitfile: Path
    spawnfile: Path
    gate: Path

    @classmethod
    def for_run(cls, machine_dir: Path, instance_id: str, start_seq: int) -> RunFiles:
        run = machine_dir / "run"
        stem = f"{instance_id}-{start_seq}"
        return cls(run / f"{stem}.pid", run / f"{stem}.exit", run / f"{stem}.spawn",
                   run / f"{stem}.gate")


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
    environment: bool = True,
) -> list[str]:
    """The full command: [nsenter] [unshare] sh -c WRAPPER bodega-machine ... -- argv.

    ``home``: the machine's directory, bound at ``HOME_MOUNT`` for it to start in (a
    machine running as its own user); None starts it in the wrapper's working directory.
    ``mounts`` are bound in their order (``bind_order``). ``environment``: the wrapper's
    stdin is the program's step (``program_step``), which runs the program; without,
    ``argv`` runs as it is, and there may be no mounts (nothing would open their gate).
    """
    for host, guest in mounts:
        for part in (str(host), guest):
            if any(c.isspace() for c in part) or "=" in part:
                raise ValueError(f"mount paths may not contain spaces or '=': {part!r}")
    if mounts and not environment:
        raise ValueError("mounts are bound once the program's step opens their gate")
    prefix: list[str] = []
    if netns is not None:
        prefix += ["nsenter", f"--net=/run/netns/{netns}", "--"]
    if mounts or home is not None:
        prefix += ["unshare", "--mount", "--propagation", "private", "--"]
    return [
        *prefix, SHELL, "-c", WRAPPER, PROGRAM_NAME,
        *wrapper_arguments(files, cgroup_procs=cgroup_procs, user=user, memory_kib=memory_kib,
                           mounts=mounts, home=str(home) if home is not None else "-",
                           environment=environment),
        *argv,
    ]


def wrapper_arguments(files: RunFiles, *, cgroup_procs: list[Path],
                      user: tuple[int, int] | None, memory_kib: int | None,
                      mounts: list[tuple[Path, str]], home: str,
                      environment: bool = True) -> list[str]:
    """WRAPPER's positional parameters before the program's argv (``home`` as given: a
    path, "-" or "@")."""
    return [
        " ".join(str(p) for p in cgroup_procs) or "-",
        str(files.pidfile), str(files.exitfile),
        f"{user[0]}:{user[1]}" if user else "-",
        str(memory_kib) if memory_kib else "-",
        " ".join(f"{host}={guest}" for host, guest in mounts) or "-",
        home,
        str(files.gate) if mounts else "-",
        "0" if environment else "-",
    ]


def program_step(env: Mapping[str, str]) -> str:
    """The machine's user's step, as the wrapper's stdin: ``env`` exported (only there),
    then the program exec'd."""
    return STEP_HEAD + environment_script(env) + STEP_TAIL


def environment_script(env: Mapping[str, str]) -> str:
    """An ``export`` of one quoted literal per variable of ``env`` a shell can export, in
    its order (what the program's step, and an exec's LOAD, run)."""
    return "".join(f"export {shlex.quote(f'{name}={value}')}\n"
                   for name, value in env.items() if SHELL_NAME.fullmatch(name))


def memory_fd(text: str) -> int:
    """A file in memory holding ``text``, read from its start (never on disk: it may hold an
    app's secrets); the worker's only (close-on-exec) unless handed on."""
    fd = os.memfd_create("bodega-env")
    data = memoryview(text.encode())
    while data:
        data = data[os.write(fd, data):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def bind_order(mounts: Iterable[Mount]) -> list[tuple[Path, str]]:
    """``mounts`` as the wrapper binds them: the files first, then one directory at most.

    A file bound (the private network's ``/etc/resolv.conf``) shadows that one path; a
    directory (a volume) shadows everything below its guest path, where the next bind's
    ``mount`` would be looked for, as root: it comes last, and alone.
    """
    pairs = [(m.host_path, m.guest_path) for m in mounts]
    directories = [guest for host, guest in pairs if host.is_dir()]
    if len(directories) > 1:
        raise DriverError(f"a machine binds one directory at most, not {directories}")
    return sorted(pairs, key=lambda pair: pair[0].is_dir())


def make_gate(files: RunFiles) -> None:
    """The run's gate, made afresh (one an earlier attempt left may hold a word)."""
    files.gate.unlink(missing_ok=True)
    os.mkfifo(files.gate, 0o600)


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
