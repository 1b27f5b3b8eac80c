"""What a process machine's exec chain costs a start: the wrapper, and each of its parts.

A parked launcher runs the machine's wrapper (``drivers/process/launch.py``), root, which
forks the machine user's step through ``unshare``; the step exports the machine's
variables and execs the program. Timed here, interleaved run after run, from fork to
exit, with ``PATH`` alone as environment, the program ``/bin/true``:

- ``/bin/true`` alone (the baseline);
- the parts: a shell that execs it, a shell that forks it, ``unshare`` taking the user,
  and ``unshare`` running the step's shell;
- the whole wrapper with the machine's directory already bound at ``HOME_MOUNT`` (``@``:
  what a launcher parked ahead binds, at a free address too since its spare directory),
  and with the wrapper binding it itself (``mount --bind``, what a start did before).

Needs root (it binds, and changes user); it runs in a mount namespace of its own.

    python -m bench.machines.start_chain [--runs 200] [--uid 65534]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.machines.exec_times import report, timed
from bodega.worker.drivers.process.launch import (
    HOME_MOUNT,
    PROGRAM_NAME,
    SHELL,
    WRAPPER,
    RunFiles,
    program_step,
    wrapper_arguments,
)

PROGRAM = "/bin/true"
OWN_MOUNTS = "BODEGA_BENCH_OWN_MOUNTS"  # set once re-run in a mount namespace of its own


def parts(uid: int) -> dict[str, tuple[list[str], bytes | None]]:
    switch = ["unshare", f"--setuid={uid}", f"--setgid={uid}", "--"]
    step = program_step({}).encode()
    return {"true": ([PROGRAM], None),
            "sh, exec": ([SHELL, "-c", f"exec {PROGRAM}"], None),
            "sh, fork": ([SHELL, "-c", f"{PROGRAM}; echo $? >/dev/null"], None),
            "unshare": ([*switch, PROGRAM], None),
            "unshare, step": ([*switch, SHELL, "-s", "--", "-", PROGRAM], step)}


def wrapper(home: Path, files: RunFiles, uid: int, bound: bool) -> tuple[list[str], bytes]:
    arguments = wrapper_arguments(files, cgroup_procs=[], user=(uid, uid), memory_kib=None,
                                  mounts=[], home="@" if bound else str(home))
    return [SHELL, "-c", WRAPPER, PROGRAM_NAME, *arguments, PROGRAM], program_step({}).encode()


def main(runs: int, uid: int) -> None:
    machine = Path(tempfile.mkdtemp(prefix="bodega-start-chain-"))
    try:
        measure(machine, runs, uid)
    finally:
        shutil.rmtree(machine)


def measure(machine: Path, runs: int, uid: int) -> None:
    home = machine / "root"
    home.mkdir()
    (machine / "run").mkdir()
    os.chown(home, uid, uid)
    HOME_MOUNT.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(home), str(HOME_MOUNT)], check=True)
    commands = parts(uid)
    times: dict[str, list[float]] = {name: [] for name in
                                     [*commands, "wrapper, home bound ahead", "wrapper, binds"]}
    for run in range(runs):
        for name, (argv, stdin) in commands.items():
            times[name].append(timed(argv, stdin))
        for bound in (True, False):
            files = RunFiles.for_run(machine, "bench", run * 2 + bound)
            name = "wrapper, home bound ahead" if bound else "wrapper, binds"
            times[name].append(timed(*wrapper(home, files, uid, bound)))
            if not bound:  # its bind, over the one made ahead: undone for the next run
                subprocess.run(["umount", str(HOME_MOUNT)], check=True)
    report(f"a machine's exec chain, {PROGRAM} as the program", times, "true")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--uid", type=int, default=65534, help="the user (and group) to take")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench.machines.start_chain binds and changes user: run it as root")
    if os.environ.get(OWN_MOUNTS) != "1":  # its binds stay out of the host's mounts
        os.execvpe("unshare", ["unshare", "--mount", "--propagation", "private", "--",
                               sys.executable, "-m", "bench.machines.start_chain", *sys.argv[1:]],
                   {**os.environ, OWN_MOUNTS: "1"})
    main(args.runs, args.uid)
