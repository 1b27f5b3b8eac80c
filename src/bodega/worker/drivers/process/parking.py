"""Parked launchers: a process already in a machine's namespace and cgroups, waiting to run it.

Starting a machine the plain way costs more than its program: ``nsenter``
into the namespace, then moving the wrapper into the memory and cpu
cgroups, and on a cgroup v1 host each move waits for an RCU grace period
(about 7 ms each here). The worker wires the next addresses' namespaces
ahead of time; a *parked launcher* goes one step further and waits inside
such a namespace, already in cgroups of its own (``park-<namespace>``)::

    wire ahead ─▶ park: nsenter ─▶ sh joins park cgroups ─▶ blocks reading its FIFO
    start      ─▶ rename park cgroups to the machine's ─▶ set limits ─▶ write the run
                  script into the FIFO ─▶ sh runs it (``.``) ─▶ the usual wrapper ─▶ program

Renaming a cgroup moves nothing, so the start costs a FIFO write and an
exec. The launcher's own shell reads the run script from the FIFO and runs it:
no file holds it (it holds the machine's environment, app secrets among it),
and no process is spawned to remove one. The run script only ever holds
literals (``shlex.quote``) and re-enters the same wrapper as a plain start,
with the same pidfile and exit file, so crash safety is unchanged: once the
launcher has exec'd, its command line names the run's pidfile; a launcher
that never got its run is found and killed when the worker starts again
(``reap``). A launcher whose namespace was rewired under it (checked by
inode) is discarded, never used.

The launcher binds, while it waits, the directory its machine's program starts in (at
``HOME_MOUNT``), so the start has no ``mount`` to run (a process before the program's:
``bench.machines.start_chain`` measured 2.5 ms of the wrapper's time on one host). Parked for a
machine at rest, it binds that machine's. Parked at a free address where machines run as
their own users, it makes the next machine's directory itself (``root``, ``logs`` and
``run``, in its own directory) and binds that ``root``; the create's prepare renames them
into the machine's directory (``furnish``, once the launcher is ``ready``: bound). A bind
follows the directory, not its path. A spare no create took (a machine whose directory
was made before) is bound over by the start, as a launcher with nothing bound would be.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bodega.worker.drivers.base import RESOLV_CONF, TaskSpec
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.drivers.process.launch import (
    HOME_MOUNT,
    MACHINE_DIRS,
    PROGRAM_NAME,
    SHELL,
    WRAPPER,
    RunFiles,
    home_of,
    make_gate,
    program_step,
    wrapper_arguments,
)
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.drivers.process.procfs import pids_with_argument
from bodega.worker.drivers.process.warmup import Warmup

log = logging.getLogger("bodega.worker.parking")

PARK_NAME = "bodega-park"
# In a launcher's directory: the next machine's directory, made ahead (``MACHINE_DIRS``).
SPARE_HOME = "home"
# The launcher waits in a mount namespace of its own, so the start does not make one (a
# new mount namespace costs milliseconds). A slave of the host's: mounts and unmounts
# made on the host meanwhile (a network namespace's removal among them) still reach it,
# and the machine's own (its directory at HOME_MOUNT, its volumes) never reach the host.
PRIVATE_MOUNTS = ("unshare", "--mount", "--propagation", "slave", "--")
# $1: the launcher's directory (its FIFO lives there), $2: cgroup.procs files to join, $3:
# the directory its machine's program starts in, bound at HOME_MOUNT now rather than by its
# start: a machine at rest's, or the spare it made for the next one at a free address ("-":
# none, or its machine runs as the worker's user), $4: the private
# network's resolv.conf, bound read-only over /etc/resolv.conf now ("-": none): the
# machine's start then has nothing to bind, and its wrapper runs no gate and no ``mount``.
# Once in its cgroups it says so (``ready``, made by the shell itself, no process spawned):
# creates prefer an address whose launcher is that far (``waiting``). Then it runs the
# script the start writes into its FIFO, in this same shell (``.`` blocks until a writer
# comes, and reads to the end); the script ends by exec'ing the wrapper. It is one ``{ }``
# group, parsed whole before any of it runs: a script cut short (the worker killed while
# writing it) is a syntax error and runs nothing, never a command missing its last words.
PARK = r"""set -f
dir=$1 cgs=$2 home=$3 resolv=$4
for cg in $cgs; do echo $$ > "$cg" || exit 1; done
if [ "$home" != - ]; then mount --bind "$home" HOME_MOUNT || exit 1; fi
if [ "$resolv" != - ]; then mount --bind -o ro "$resolv" RESOLV_CONF || exit 1; fi
: > "$dir/ready"
. "$dir/go"
exit 1
""".replace("HOME_MOUNT", shlex.quote(str(HOME_MOUNT))).replace("RESOLV_CONF", RESOLV_CONF)


@dataclass
class Parked:
    netns: str
    directory: Path
    popen: subprocess.Popen[bytes]
    netns_inode: tuple[int, int] | None  # (device, inode) of its namespace when parked
    home: Path | None = None  # bound at HOME_MOUNT while parked
    home_inode: tuple[int, int] | None = None  # (device, inode) of ``home`` then
    resolv: bool = False  # the private network's resolv.conf bound at RESOLV_CONF
    # ``home`` is the launcher's own, made ahead for the next machine here: a "spare" until
    # a create takes it, then "furnished" (renamed into that machine's directory).
    own_home: Literal["", "spare", "furnished"] = ""

    def holds(self, home: Path | None) -> bool:
        """Parked with ``home`` bound; for none (a free address): nothing bound, or a
        directory of its own (a spare, or one a create has just taken: its start comes)."""
        return self.home == home if home is not None else (
            self.home is None or self.own_home != "")

    def intact(self) -> bool:
        """What it bound is still there, the same directory (device and inode)."""
        return self.home is None or _identity(self.home) == self.home_inode

    @property
    def pid(self) -> int:
        return self.popen.pid


class Parking:
    def __init__(self, root: Path, cgroups: Cgroups, warmup: Warmup | None = None,
                 resolv_conf: Path | None = None, spare_homes: bool = False) -> None:
        self.root = root
        self.cgroups = cgroups
        self.warmup = warmup
        self.resolv_conf = resolv_conf  # the private network's, bound by each launcher
        # Machines run as their own users, from their directory bound at HOME_MOUNT: a
        # launcher at a free address makes the next one's ahead.
        self.spare_homes = spare_homes
        self._parked: dict[str, Parked] = {}
        # A spare a start took unfurnished, by namespace: its run's launcher, until it ends.
        self._taken_spares: dict[str, subprocess.Popen[bytes]] = {}

    def park(self, netns: str, home: Path | None = None) -> None:
        """Leave a launcher waiting in ``netns`` (once; a no-op if one is there), with
        ``home`` (a machine at rest's directory) already bound at HOME_MOUNT; with none (a
        free address), a spare directory of its own where ``spare_homes`` says so."""
        home_inode = _identity(home) if home is not None else None
        if home_inode is None:
            home = None  # none, or not made yet: a spare, or its start binds it
        current = self._parked.get(netns)
        if current is not None:
            if (current.popen.poll() is None and self._fresh(current)
                    and current.holds(home) and current.intact()):
                return
            del self._parked[netns]
            self._discard(current)  # dead, in a namespace rebuilt, or for another directory
        directory = self.root / netns
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "ready").unlink(missing_ok=True)
        own_home: Literal["", "spare"] = ""
        if home is None and self.spare_homes and self._spare_free(netns):
            try:
                home = _spare_home(directory / SPARE_HOME)
            except OSError as exc:  # a full disk: parked with none, its start binds it
                log.warning("could not make a spare directory in %s: %s", directory, exc)
            else:
                home_inode, own_home = _identity(home), "spare"
        fifo = directory / "go"
        if not fifo.exists():
            os.mkfifo(fifo, 0o600)
        slot = park_slot(netns)
        self.cgroups.create(slot, memory_mb=None, cpus=None)
        procs = " ".join(str(p) for p in self.cgroups.procs_files(slot))
        if home is not None:
            HOME_MOUNT.mkdir(parents=True, exist_ok=True)
        # Not written yet (the private network still starting): its start binds it.
        resolv = self.resolv_conf if self.resolv_conf and self.resolv_conf.is_file() else None
        try:
            popen = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{netns}", "--", *PRIVATE_MOUNTS, SHELL, "-c",
                 PARK, PARK_NAME, str(directory), procs, str(home) if home else "-",
                 str(resolv) if resolv else "-"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd="/", start_new_session=True, close_fds=True, env={"PATH": os.defpath})
        except OSError as exc:
            log.warning("could not park a launcher in %s: %s", netns, exc)
            if own_home:
                shutil.rmtree(directory / SPARE_HOME, ignore_errors=True)
            return
        self._parked[netns] = Parked(netns, directory, popen, _identity(Path("/run/netns") / netns),
                                     home, home_inode, resolv is not None, own_home)

    async def clear(self) -> None:
        """Until parking may make a cgroup without waiting on an image start's warm-up."""
        if self.warmup is not None:
            await self.warmup.clear()

    def waiting(self, netns: str) -> bool:
        """A launcher is parked in ``netns`` and already in its cgroups: a start there now
        only has to exec (it may still be a moment from reading its FIFO: ``take`` then
        starts plainly)."""
        parked = self._parked.get(netns)
        return (parked is not None and (parked.directory / "ready").exists()
                and parked.popen.poll() is None)

    def holds(self, netns: str, home: Path | None = None) -> bool:
        parked = self._parked.get(netns)
        return parked is not None and parked.holds(home)

    def furnish(self, netns: str, machine_dir: Path) -> bool:
        """Make the spare directory of the launcher waiting in ``netns`` the new machine's
        ``machine_dir`` (its parts renamed in: the bound ``root`` stays bound), so its start
        binds nothing. False, changing nothing, when there is none, the launcher has not
        bound it yet (not ``ready``: renamed away, its bind would fail), or the machine has a
        ``root`` already (a prepare done before): its start then binds the machine's
        directory itself. What the spare lacks the prepare makes, as for any machine."""
        parked = self._parked.get(netns)
        root = machine_dir / MACHINE_DIRS[0]
        if (parked is None or parked.own_home != "spare" or parked.popen.poll() is not None
                or not (parked.directory / "ready").exists() or root.exists()):
            return False
        spare = parked.directory / SPARE_HOME
        try:
            machine_dir.mkdir(parents=True, exist_ok=True)
            os.rename(spare / root.name, root)
        except OSError as exc:
            log.warning("%s: could not take the directory parked ahead: %s", netns, exc)
            return False
        parked.home, parked.own_home = root, "furnished"
        for part in MACHINE_DIRS[1:]:
            with contextlib.suppress(OSError):
                os.rename(spare / part, machine_dir / part)
        shutil.rmtree(spare, ignore_errors=True)  # whatever the machine had already
        return True

    def take(self, spec: TaskSpec, files: RunFiles,
             user_memory_kib: int | None,
             mounts: list[tuple[Path, str]]) -> subprocess.Popen[bytes] | None:
        """Run ``spec`` with the launcher parked in its namespace; None to start it plainly.
        ``mounts``: its mounts as the wrapper binds them (``bind_order``)."""
        if spec.netns is None:
            return None
        parked = self._parked.pop(spec.netns, None)
        if parked is None:
            return None
        (parked.directory / "ready").unlink(missing_ok=True)
        if parked.popen.poll() is not None or not self._fresh(parked):
            self._discard(parked)  # it died, or its namespace was rebuilt under it
            return None
        # A spare no create took: the wrapper binds the machine's directory over it.
        bound = parked.home is not None and parked.own_home != "spare"
        if bound and (parked.home != home_of(spec) or not parked.intact()):
            # It bound another machine's directory, or one removed since: a bind over that
            # would fail (a removed directory has no path to bind onto).
            self._discard(parked)
            return None
        try:
            fd = os.open(parked.directory / "go", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: still joining its cgroups, not yet reading; keep it for later
            self._parked[spec.netns] = parked
            return None
        try:
            self.cgroups.adopt(park_slot(spec.netns), spec.machine_id, spec.memory_mb, spec.cpus,
                               spec.swap_mb)
            left = [(host, guest) for host, guest in mounts  # less the file bound ahead
                    if not (parked.resolv and guest == RESOLV_CONF and not host.is_dir())]
            if left:
                make_gate(files)
            # Whole, through the FIFO: the launcher reads as it comes (a script larger than
            # the pipe holds waits for it), and runs it once the FIFO is closed.
            os.set_blocking(fd, True)
            script = memoryview(run_script(spec, files, user_memory_kib, left,
                                           bound).encode())
            while script:
                script = script[os.write(fd, script):]
        except OSError as exc:
            log.warning("%s: could not hand over to the parked launcher: %s", spec.machine_id,
                        exc)
            os.close(fd)
            self._discard(parked)
            return None
        os.close(fd)
        # A spare it bound stays while the run lives (the next reap takes it after): the run
        # binds the machine's directory onto it, and a bind onto a removed one fails.
        if parked.own_home == "spare":
            self._taken_spares[spec.netns] = parked.popen
        return parked.popen

    @staticmethod
    def _fresh(parked: Parked) -> bool:
        """Still in the namespace now wired at that address (not one deleted since).

        A launcher still in our own namespace has not reached ``nsenter``'s switch yet:
        it is on its way, not stale.
        """
        here = _identity(Path(f"/proc/{parked.pid}/ns/net"))
        wired = _identity(Path("/run/netns") / parked.netns)
        if here == _identity(Path("/proc/self/ns/net")):
            return wired == parked.netns_inode
        return here == parked.netns_inode == wired

    def _spare_free(self, netns: str) -> bool:
        """Whether the spare directory at ``netns`` may be made afresh: no start that took
        it unfurnished still runs there (an upkeep's look from before that start may park
        here again; removing the spare under the start would fail its bind, ENOENT)."""
        taken = self._taken_spares.get(netns)
        if taken is not None and taken.poll() is None:
            return False
        self._taken_spares.pop(netns, None)
        return True

    def _discard(self, parked: Parked) -> None:
        (parked.directory / "ready").unlink(missing_ok=True)
        if parked.popen.poll() is None:  # not reaped yet: its pid is still its own
            with contextlib.suppress(ProcessLookupError):
                os.killpg(parked.pid, signal.SIGKILL)
            parked.popen.wait()
        else:  # reaped: its pid may be a stranger's by now; what it left is in its cgroup
            self.cgroups.kill_all(park_slot(parked.netns))
        with contextlib.suppress(OSError):
            self.cgroups.remove(park_slot(parked.netns))
        if parked.own_home == "spare":  # no machine's yet
            shutil.rmtree(parked.directory / SPARE_HOME, ignore_errors=True)

    def release(self, netns: str) -> None:
        """Kill the launcher waiting in ``netns``, if any (the namespace is going away)."""
        parked = self._parked.pop(netns, None)
        if parked is not None:
            self._discard(parked)

    def close(self) -> None:
        """Kill every launcher still waiting (the worker is stopping)."""
        for parked in list(self._parked.values()):
            self._discard(parked)
        self._parked.clear()

    def reap(self) -> None:
        """Kill launchers a previous run of this worker left waiting, and their cgroups."""
        for directory in self.root.glob("*") if self.root.exists() else []:
            for pid in pids_with_argument(str(directory)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.cgroups.kill_all(park_slot(directory.name))
            with contextlib.suppress(OSError):  # busy until the killed have exited: parking
                self.cgroups.remove(park_slot(directory.name))  # there later reuses it
            shutil.rmtree(directory / SPARE_HOME, ignore_errors=True)


def park_slot(netns: str) -> str:
    """The cgroup name a launcher waits in before it becomes a machine's."""
    return f"park-{netns}"


def run_script(spec: TaskSpec, files: RunFiles, memory_kib: int | None,
               mounts: list[tuple[Path, str]], home_bound: bool = False) -> str:
    """What a parked launcher runs: the plain start's wrapper, as literals only;
    ``mounts``: what is left to bind (``bind_order``'s, less what the launcher bound when it
    parked); ``home_bound``: the launcher bound the machine's directory then (``@``).

    The program's step, the machine's variables in it, is the wrapper's stdin as on a plain
    start: here a here-document, which dash keeps in a pipe (never a file). The launcher's
    own environment, the wrapper's, is PATH (given at park) and the shell's PWD and OLDPWD.
    """
    q = shlex.quote
    home = home_of(spec)
    home_arg = "@" if home_bound and home is not None else (
        str(home) if home is not None else "-")
    arguments = wrapper_arguments(files, cgroup_procs=[], user=spec.user,
                                  memory_kib=memory_kib, mounts=mounts, home=home_arg)
    step = program_step(spec.env)
    end = "BODEGA_STEP"
    while end in step.splitlines():
        end += "_"
    return (
        "{\n"
        f"exec >>{q(str(log_path(spec.machine_dir)))} 2>&1\n"
        f"cd {q(str(spec.machine_dir / 'root'))} || {{ echo 125 > {q(str(files.exitfile))}; "
        "exit 125; }\n"
        f"exec {SHELL} -c {q(WRAPPER)} {PROGRAM_NAME} "
        f"{' '.join(q(a) for a in [*arguments, *spec.argv])} <<'{end}'\n"
        f"{step}{end}\n"
        "}\n"
    )


def _spare_home(spare: Path) -> Path:
    """A machine's directory made afresh at ``spare`` (whatever an earlier launcher left
    there goes); the ``root`` a launcher binds."""
    shutil.rmtree(spare, ignore_errors=True)
    for part in MACHINE_DIRS:
        (spare / part).mkdir(parents=True)
    return spare / MACHINE_DIRS[0]


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names (a namespace, a directory); None if gone."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
