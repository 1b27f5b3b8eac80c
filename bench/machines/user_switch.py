"""What taking a machine's user costs a start: each way of doing it, exec'ing ``/bin/true``.

A process machine's wrapper, root, runs the program's step as the machine's user
(``drivers/process/launch.py``) through a command that sets its uid and gid and drops
every other group. Timed here, interleaved run after run, with ``PATH`` alone as their
environment (as the wrapper runs them), from fork to exit:

- ``/bin/true`` alone (the baseline);
- ``unshare --setuid --setgid``: no namespace made, the user taken (what the wrapper runs);
- ``nsenter --uts=/proc/self/ns/uts --setuid --setgid``: the UTS namespace it is in, and
  the user (what the wrapper ran before; util-linux 2.41 and later refuse an nsenter with
  no namespace to enter);
- ``setpriv --reuid --regid --clear-groups`` (what it ran before that);
- ``chroot --userspec=+uid:+gid --groups= --skip-chdir /`` (GNU coreutils; not every host's
  ``chroot`` takes these, busybox's does not).

Needs root (it changes user).

    python -m bench.machines.user_switch [--runs 300] [--uid 65534]
"""

from __future__ import annotations

import argparse
import os
import shutil

from bench.machines.exec_times import report, timed
from bodega.worker.drivers.process.entry import OWN_NAMESPACE


def ways(uid: int) -> dict[str, list[str]]:
    found = {"true": ["/bin/true"],
             "unshare": ["unshare", f"--setuid={uid}", f"--setgid={uid}", "--", "/bin/true"],
             "nsenter": ["nsenter", OWN_NAMESPACE, f"--setuid={uid}", f"--setgid={uid}", "--",
                         "/bin/true"],
             "setpriv": ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                         "/bin/true"]}
    chroot = shutil.which("chroot", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if chroot is not None:
        found["chroot"] = [chroot, f"--userspec=+{uid}:+{uid}", "--groups=", "--skip-chdir", "/",
                           "/bin/true"]
    return found


def main(runs: int, uid: int) -> None:
    if os.geteuid() != 0:
        raise SystemExit("bench.machines.user_switch changes user: run it as root")
    commands = ways(uid)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(timed(argv))
    report("exec of /bin/true through each", times, "true")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--uid", type=int, default=65534, help="the user (and group) to take")
    args = parser.parse_args()
    main(args.runs, args.uid)
