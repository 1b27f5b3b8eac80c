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
for as Ctrl-C asks it, with SIGINT (``systemctl kill --kill-whom=main
--signal=SIGINT``). A reboot brings the host back as it was (the data dir
keeps its identity; ``bodega join`` needs no token again), its machines
started again by their workers.

A token on the command line (``--token``) never goes into the unit, which
anyone on the host may read: it goes to an environment file of its own, mode
0600 (``BODEGA_API_TOKEN`` for ``up``, ``BODEGA_JOIN_TOKEN`` for ``join``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

COMMANDS = {"up": "BODEGA_API_TOKEN", "join": "BODEGA_JOIN_TOKEN"}
STOP_TIMEOUT = 90  # seconds: a worker's stop grace, and its machines' stops


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
        "# them. SIGINT (systemctl kill --kill-whom=main --signal=SIGINT) stops them too.",
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
