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
``if s RUN; then VAR=value ... 'program' args 3<&- </dev/null >out/RUN.log 2>&1; e $?; fi``,
whose every word from the job is a literal (``shlex.quote``; the program's name always
quoted, so that no name is read as a reserved word or an assignment): the shell runs the
program with exactly the argv given, as a machine's ``init.exec`` is run, never by a
shell's reading of it. The task runs in the foreground, which the shell starts with
``vfork`` (a process that borrows the shell's memory until its ``exec``: a tenth of a
millisecond less than the ``fork`` a background job costs, per task). A program named as
one of a shell's own commands (``SHELL_WORDS``: ``echo``, ``test``...) would run as that
command, so it runs as ``(VAR=value exec 'program' args)``, a subshell that ``exec``s it,
forked as before. A command or variable holding a newline cannot be one line, so such a
job runs a machine per task, as does a job of an image (its root may have no shell) and
one whose line would be longer than ``PIPE_BUF`` (4 KiB: a longer write to a FIFO may land
in part, and the shell would run what came).

Signals: a slot is stopped as every process machine is, by a signal to its process group
(the driver's ``killpg``), which the task, a child in that group, gets too: stopping a slot
stops its task, whose exit code is ``128 + N`` for a signal, as for any machine. While a
task runs the loop traps the signal (SIGTERM, SIGINT) and, once the task is gone, writes
its end and exits; a slot with no task running is ended by the signal itself, at once (a
shell waiting on its input would take a trapped signal only once a line came).

A run number never repeats, and the loop remembers the last ``SEEN`` runs it started (in
a variable: no file, which costs the kernel far more than the task's bookkeeping), so it
skips a line it already saw: a worker restarted between recording where a task goes and
writing its line writes it again without running it twice. Only runs the worker held in
the slot when it stopped are written again, never more than ``MAX_DEPTH``, all among the
last the slot saw. Lines need not come in run order.

Slots outlive their worker, so one found after an upgrade may run an earlier version's
loop (``loop_of``): it is given again, in that loop's form (``task_line``), the runs it
held, and no others.

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
LOOP = 3  # the version of the slot loop below (``RUNNER``), as ``loop_of`` tells them
# The names a shell runs as its own command, not as a program found in PATH (the builtins
# of dash, of bash and of busybox's ash), and the loop's own functions: a task whose program
# is named so runs in a subshell that execs it (``_command``).
SHELL_WORDS = frozenset({
    ".", ":", "[", "[[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "chdir",
    "command", "compgen", "complete", "compopt", "continue", "declare", "dirs", "disown", "e",
    "echo", "enable", "eval", "exec", "exit", "export", "false", "fc", "fg", "getopts", "hash",
    "help", "history", "jobs", "kill", "let", "local", "logout", "mapfile", "popd", "printf",
    "pushd", "pwd", "read", "readarray", "readonly", "return", "s", "set", "shift", "shopt",
    "source", "suspend", "test", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unalias", "unset", "wait",
})

# The slot's program (``sh -c RUNNER``), in its own directory. Builtins only per task:
# the task's own process and nothing else. Each line calls ``s`` (a run seen before is
# skipped; a stop from here on waits for the task) and, once the task has ended, ``e``
# with its exit code (its end written, the stop's trap taken off). Slots outlive their
# worker: a change to it leaves slots of this loop running after an upgrade, to be told
# apart (``loop_of``) and given lines they read (``task_line``).
RUNNER = r"""
cd "${BODEGA_SLOT_DIR:-.}" || exit 111
rm -f tasks done results
mkfifo -m 600 tasks done || exit 111
mkdir -p out || exit 111
exec 3<>tasks
seen=' ' held=0 run= stopping=
s() {
  case "$seen" in *" $1 "*) return 1 ;; esac
  seen="$seen$1 " held=$((held + 1)) run=$1
  [ "$held" -le @SEEN@ ] || seen=" ${seen# * }" held=$((held - 1))
  trap 'stopping=1' TERM INT
}
e() {
  fmt='%s %s\n'
  until printf "$fmt" "$run" "$1" >> results 2>/dev/null; do
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
    for ``s``, then its environment and argv as literals, run in the foreground with its
    output in ``out/<run>.log``, then ``e`` with its exit code."""
    return (f"if s {run}; then {_command(config)} 3<&- </dev/null "
            f">out/{run}.log 2>&1; e $?; fi\n").encode()


def loop_of(config: MachineConfig) -> int:
    """Which version of the slot loop a slot machine runs, by its program: ``LOOP`` (this
    one), or one found running after an upgrade: ``1`` read each line with ``read`` and
    ran all but its first word with ``eval``; ``2`` read its FIFO as a script, as this one
    does, and ran each task in the background."""
    argv = config.command() or []
    if argv == list(PROGRAM):
        return LOOP
    return 1 if any("read -r line" in word for word in argv) else 2


def task_line(loop: int, run: int, config: MachineConfig) -> bytes:
    """A task's line for a slot running ``loop`` (``loop_of``)."""
    if loop == 1:
        return f"{run} {_exec(config)}\n".encode()
    if loop == 2:
        return (f"if s {run}; then {_exec(config)} 3<&- </dev/null "
                f">out/{run}.log 2>&1 & e; fi\n").encode()
    return dispatch_line(run, config)


def _command(config: MachineConfig) -> str:
    """A task as a simple command the shell runs in the foreground: its environment and
    argv as literals, the program's name quoted always; a program named as one of a shell's
    own commands in a subshell that ``exec``s it."""
    argv = config.command() or [""]
    if "/" not in argv[0] and argv[0] in SHELL_WORDS:
        return f"({_exec(config)})"
    return " ".join([_env(config), _quoted(argv[0]), *map(shlex.quote, argv[1:])]).lstrip()


def _exec(config: MachineConfig) -> str:
    """A task's environment and argv as shell literals: ``VAR=value ... exec argv``."""
    return f"{_env(config)} exec {shlex.join(config.command() or [])}".lstrip()


def _env(config: MachineConfig) -> str:
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in (config.env or {}).items())


def _quoted(word: str) -> str:
    """``word`` in single quotes, even where ``shlex.quote`` leaves it bare (``a=b`` would
    be an assignment, ``if`` a reserved word)."""
    return "'" + word.replace("'", "'\"'\"'") + "'"


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
