"""Warm slots: a machine that runs bodega-pool tasks one after another, the rules of it.

A task of nothing costs far less than the machine it used to get (a namespace,
cgroups, a durable create and teardown, rows in the registry), so a worker keeps
a *slot*: a machine of a task's size whose program is the small POSIX shell loop
below, ``RUNNER``. It reads one task per line from a FIFO in its directory and
runs it as a child of its own (the machine's cgroups, namespaces and user), its
output in ``out/<run>.log``, then appends ``<run> <exit code>`` to ``results`` and
wakes the worker through a second FIFO (``done``). The worker writes the next
task's line while the last one runs, so a slot never waits on a round trip.

Slots are shared by every job whose tasks would run as the same machine (same
app, image, size, mounts, files: ``slot_key``), so a stream of one-task jobs reuses
warm slots as a stream of tasks of one job does. A task's own environment, the
job's ``env`` and ``BODEGA_TASK`` among it, travels in its line, never in the slot's
config.

The FIFO is the shell's own input (``. ./tasks``), read in blocks as a script is: the
``read`` builtin would take a pipe a byte at a time, a system call for each byte of a
line of a few hundred. So a line is shell code of one fixed form (``dispatch_line``):
``if s RUN; then VAR=value ... exec argv 3<&- </dev/null >out/RUN.log 2>&1 & e; fi``,
whose every word from the job is a literal (``shlex.quote``): the shell execs the
program with exactly the argv given, as a machine's ``init.exec`` is run, never by a
shell's reading of it. A command or variable holding a newline cannot be one line, so
such a job runs a machine per task, as does a job of an image (its root may have no
shell) and one whose line would be longer than ``PIPE_BUF`` (4 KiB: a longer write to a
FIFO may land in part, and the shell would run what came).

Signals: the slot's stop signal reaches the task (while one runs, the loop forwards
SIGTERM and SIGINT to it and ends once it is gone), so stopping a slot stops its task;
its exit code is ``128 + N`` for a signal, as for any machine. A slot with no task
running is ended by the signal itself, at once: a shell waiting on its input takes a
trapped signal only once a line comes. A run number never repeats, and the loop
remembers the last ``SEEN`` runs it started (in a variable: no file, which costs the
kernel far more than the task's bookkeeping), so it skips a line it already saw: a
worker restarted between recording where a task goes and writing its line writes it
again without running it twice. Only runs the worker held in the slot when it stopped
are written again, never more than ``MAX_DEPTH``, all among the last the slot saw.
Lines need not come in run order.

A task's end is written to ``results`` before the worker is woken, and kept trying
(every second) while the slot's disk is full: an end the worker never reads would hold
its task's lease for good. A retry begins with a newline, so a line torn by the full
disk ends there and is skipped (``results``).
"""

from __future__ import annotations

import hashlib
import math
import re
import select
import shlex

from bodega.jobs.spec import PROCESS_IMAGE
from bodega.model.machine_config import Init, MachineConfig

SLOT_KEY = "bodega_slot"  # metadata of a slot machine: the kind of task it runs
SHORT = 0.5  # seconds: a job whose task ran shorter gets its next tasks written ahead
AHEAD = 0.25  # seconds of a short job's work written ahead in a slot, beyond its running task
MAX_DEPTH = 8  # runs a slot holds at most: the one running and those written ahead
SEEN = 4 * MAX_DEPTH  # runs a slot remembers having started: a line written again is skipped
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LARGEST_RUN = 2**63 - 1  # a run number as long as one can be

# The slot's program (``sh -c RUNNER``), in its own directory. Builtins only per task:
# a fork for the task's program and nothing else. Each line calls ``s`` (a run seen
# before is skipped; a stop is forwarded to the task from here on) and, once the task is
# started in the background, ``e`` (its wait, its end written, the stop's trap taken off).
# Slots outlive their worker: a change to it leaves slots of this loop running after an
# upgrade, to be told apart (``runs_this_loop``) and given lines they read (``earlier_line``).
RUNNER = r"""
cd "${BODEGA_SLOT_DIR:-.}" || exit 111
rm -f tasks done results
mkfifo -m 600 tasks done || exit 111
mkdir -p out || exit 111
exec 3<>tasks
seen=' ' held=0 run= child= stopping=
s() {
  case "$seen" in *" $1 "*) return 1 ;; esac
  seen="$seen$1 " held=$((held + 1)) run=$1
  [ "$held" -le @SEEN@ ] || seen=" ${seen# * }" held=$((held - 1))
  trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' TERM INT
}
e() {
  child=$!
  wait "$child"; code=$?
  while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
  child=
  fmt='%s %s\n'
  until printf "$fmt" "$run" "$code" >> results 2>/dev/null; do
    fmt='\n%s %s\n'
    sleep 1
  done
  printf '%s\n' "$run" > done
  [ -z "$stopping" ] || exit 0
  trap - TERM INT
}
: > ready
. ./tasks
""".replace("@SEEN@", str(SEEN))

PROGRAM = ("/bin/sh", "-c", RUNNER, "bodega-slot")  # a slot machine's init.exec


def depth(took: float | None) -> int:
    """How many runs of a job a slot holds, given how long its last task took there (None:
    none ran yet, or one ran for ``SHORT`` or longer): one, running, for a job not known to
    be short; for a short one, also the next, and as many more as make ``AHEAD`` seconds of
    work, so that the slot's next task is written before it is wanted even when the take
    that brings it waits its turn on a busy worker. Bounded both ways: at least one ahead
    (a job of 0.4 s tasks), at most ``MAX_DEPTH`` in all (a job of 2 ms tasks), since a run
    written into a slot is bound to this worker while another may have room for it."""
    if took is None or took >= SHORT:
        return 1
    return max(2, min(MAX_DEPTH, 1 + math.ceil(AHEAD / max(took, 0.001))))


def take_now(room: int, fill: list[int], holds: int) -> bool:
    """Whether a worker asks a job's home now for tasks for ``room`` places in its slots of
    the job, each slot holding ``fill[i]`` runs of at most ``holds``: at once when one slot
    would otherwise run dry (it holds the task it runs and nothing after it) or nothing is
    written ahead (``holds`` 1: a job not known to be short); else once the room is half of
    what those slots hold. A take and its commit cost the home about as much as the tasks it
    brings, so a stream of short tasks is taken in a few large takes, not one per end."""
    if room <= 0:
        return False
    if holds <= 1 or not fill or min(fill) <= 1:
        return True
    return 2 * room >= holds * len(fill)


def eligible(config: MachineConfig) -> bool:
    """Whether a task of this config can run in a slot: a host program (the process
    driver's image) whose argv and environment each fit on one line."""
    argv = config.command()
    if config.image != PROCESS_IMAGE or not argv:
        return False
    env = config.env or {}
    if not all(SHELL_NAME.fullmatch(name) for name in env):
        return False
    if any("\n" in word or "\r" in word for word in (*argv, *env.values())):
        return False
    # A line longer than PIPE_BUF may be written in part: the slot would wait for its end.
    return len(dispatch_line(LARGEST_RUN, config)) <= select.PIPE_BUF


def slot_key(app: str, config: MachineConfig) -> str:
    """What a slot is for: tasks of ``app`` that would run as this machine but for their
    command, environment and metadata."""
    shape = config.model_copy(update={"env": None, "metadata": None,
                                      "init": _without_exec(config.init)})
    digest = hashlib.sha256(f"{app}\0{shape.model_dump_json(exclude_none=True)}".encode())
    return digest.hexdigest()[:20]


def slot_config(app: str, config: MachineConfig) -> MachineConfig:
    """The slot machine for tasks of this config: the same machine, running ``RUNNER``."""
    slot = config.model_copy(deep=True)
    slot.env = None
    slot.metadata = {SLOT_KEY: slot_key(app, config)}
    slot.init = (_without_exec(config.init) or Init()).model_copy(
        update={"exec": list(PROGRAM)})
    return slot


def dispatch_line(run: int, config: MachineConfig) -> bytes:
    """The line that runs one task in a slot, as the slot's shell reads it: its run number
    for ``s``, then its environment and argv as literals, run in the background with its
    output in ``out/<run>.log``, and ``e`` to wait for it."""
    return (f"if s {run}; then {_exec(config)} 3<&- </dev/null "
            f">out/{run}.log 2>&1 & e; fi\n").encode()


def runs_this_loop(config: MachineConfig) -> bool:
    """Whether a slot machine's program is this version's ``RUNNER``: a slot found running
    after an upgrade may run the loop before it, which reads lines of ``earlier_line``."""
    return config.command() == list(PROGRAM)


def earlier_line(run: int, config: MachineConfig) -> bytes:
    """A task's line for a slot of the loop before this one (which ``read`` a line and ran
    all but its first word with ``eval``): an upgraded worker writes again in this form the
    runs such a slot held, and gives it no others."""
    return f"{run} {_exec(config)}\n".encode()


def _exec(config: MachineConfig) -> str:
    """A task's environment and argv as shell literals: ``VAR=value ... exec argv``."""
    argv = config.command() or []
    env = " ".join(f"{name}={shlex.quote(value)}" for name, value in (config.env or {}).items())
    return f"{env} exec {shlex.join(argv)}"


def results(text: str) -> list[tuple[int, int]]:
    """``results`` lines as (run, exit code); a torn last line (no newline yet) is left."""
    found = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break
        run, _, code = line.strip().partition(" ")
        if run.isdigit() and code.isdigit():
            found.append((int(run), int(code)))
    return found


def _without_exec(init: Init | None) -> Init | None:
    return None if init is None else init.model_copy(update={"exec": None})
