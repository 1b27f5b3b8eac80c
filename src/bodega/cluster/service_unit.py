"""A systemd unit that runs ``bodega up`` or ``bodega join`` as a service: a pure rendering.

The unit runs the same command the user would type, from the directory they
typed it in (so a relative ``--data-dir`` means the same), with the same
Python. systemd stops it with SIGTERM: bodega stops and its machines keep
running, so ``systemctl restart`` (an upgrade, a changed flag) re-adopts them,
as flyd, kubelet and Nomad's client keep their workloads across their own
restarts. ``KillMode=process`` sends that signal to bodega alone and leaves
the rest of the unit's processes (the machines, which stay in the unit's
cgroup on a host whose systemd tracks it in a hierarchy bodega does not move
them out of) alive when it has stopped. Stopping the machines too is asked
for as Ctrl-C asks it, with SIGINT (``systemctl kill --kill-who=main
--signal=SIGINT``).

Except as the host shuts down: machines left running then would be ended by
the shutdown's last sweep, every process at once with SIGTERM and then
SIGKILL, ignoring their stop signals and timeouts, and a VM would lose its
disks' last writes. So the unit's stop (``STOP``) asks systemd whether the
system is stopping, sends SIGINT if so (bodega stops its machines as
configured, as Ctrl-C would) and SIGTERM otherwise, and waits for bodega to
end. The host comes back as it was (the data dir keeps its identity;
``bodega join`` needs no token again), and the workers start again the
machines that were started.

A token on the command line (``--token``) never goes into the unit, which
anyone on the host may read: it goes to an environment file of its own, mode
0600 (``BODEGA_API_TOKEN`` for ``up``, ``BODEGA_JOIN_TOKEN`` for ``join``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

COMMANDS = {"up": "BODEGA_API_TOKEN", "join": "BODEGA_JOIN_TOKEN"}
STOP_TIMEOUT = 90  # seconds: a worker's stop grace, and its machines' stops
# The unit's stop, a POSIX shell script given $MAINPID (bodega's pid, set by systemd for
# a stop command): SIGINT while the system shuts down (its machines stop as configured),
# SIGTERM otherwise (they run on, to be re-adopted); then wait for bodega to end.
STOP = ('if [ "$(systemctl is-system-running 2>/dev/null)" = stopping ]; then sig=INT; '
        'else sig=TERM; fi; kill -s "$sig" "$MAINPID" || exit 0; '
        'while kill -0 "$MAINPID" 2>/dev/null; do sleep 0.2; done')


@dataclass(frozen=True)
class ServiceUnit:
    name: str  # e.g. bodega-join: the unit is <name>.service
    unit: str  # the unit file's text
    environment: dict[str, str]  # what goes to the environment file (secrets)


def split_token(args: list[str]) -> tuple[list[str], str | None]:
    """``args`` without ``--token VALUE`` (or ``--token=VALUE``), and that value."""
    kept: list[str] = []
    token = None
    rest = iter(args)
    for arg in rest:
        if arg == "--token":
            token = next(rest, None)
            if token is None:
                raise ValueError("--token needs a value")
        elif arg.startswith("--token="):
            token = arg.partition("=")[2]
        else:
            kept.append(arg)
    return kept, token


def quoted(arg: str) -> str:
    """One argument as systemd's command line reads it back."""
    if arg and not any(c in arg for c in ' \t"\'\\$%;'):
        return arg
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return f'"{escaped.replace("%", "%%")}"'


def render(command: str, args: list[str], *, python: str, workdir: Path, name: str,
           env_file: Path) -> ServiceUnit:
    """The unit running ``bodega COMMAND ARGS`` with ``python``, from ``workdir``."""
    if command not in COMMANDS:
        raise ValueError(f"install-service runs bodega up or bodega join, not {command!r}")
    if not Path(python).is_absolute() or not workdir.is_absolute():
        raise ValueError("the service's python and working directory must be absolute paths")
    kept, token = split_token(args)
    environment = {COMMANDS[command]: token} if token else {}
    line = " ".join(quoted(a) for a in [python, "-m", "bodega", command, *kept])
    what = "a cluster (bodega up)" if command == "up" else "a host of a cluster (bodega join)"
    unit = "\n".join([
        "[Unit]",
        f"Description=bodega: {what}",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={quoted(str(workdir))}",
        *([f"EnvironmentFile={quoted(str(env_file))}"] if environment else []),
        f"ExecStart={line}",
        "# A stop is of bodega alone: its machines run on, and the next start re-adopts",
        "# them; as the host shuts down, it stops them too (SIGINT, as Ctrl-C does), as",
        "# does systemctl kill --kill-who=main --signal=SIGINT.",
        f"ExecStop=/bin/sh -c {quoted(STOP)}",
        "KillSignal=SIGTERM",
        "KillMode=process",
        f"TimeoutStopSec={STOP_TIMEOUT}",
        "Restart=on-failure",
        "RestartSec=5",
        "LimitNOFILE=65536",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])
    return ServiceUnit(name=name, unit=unit, environment=environment)
