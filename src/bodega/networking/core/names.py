"""What the private network's resolver answers; pure.

A question (name, type) from a machine of one network is answered from a
``Directory``, a snapshot of the registry view: the started machines with their
private addresses, and which network each app is in. Only the asker's network
is visible: an app of another network does not exist (NXDOMAIN), the way Fly's
custom networks hide each other. Names outside ``.internal`` and ``.flycast``
are not ours: the resolver recurses them to the host's.

    <app>.internal                      AAAA  every started machine of the app
    <region>.<app>.internal             AAAA  those in the region
    <machine id>.vm.<app>.internal      AAAA  that machine
    top<N>.nearest.of.<app>.internal    AAAA  the N nearest (this host's region first)
    <group>.process.<app>.internal      AAAA  those of the process group
    vms.<app>.internal                  TXT   "<id> <region>" per machine, comma-separated
    regions.<app>.internal              TXT   the regions, comma-separated
    _apps.internal                      TXT   the network's apps, comma-separated
    <app>.flycast                       AAAA  the app's Flycast addresses
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

INTERNAL = "internal"
FLYCAST = "flycast"
TOP = re.compile(r"top([1-9][0-9]{0,2})")


class Outcome(StrEnum):
    ANSWER = "answer"  # records (possibly none: the name exists, not with this type)
    NXDOMAIN = "nxdomain"  # no such name, as the asker's network sees it
    RECURSE = "recurse"  # not ours: ask the host's resolver


@dataclass(frozen=True)
class Machine:
    id: str
    app: str
    region: str
    address: str  # its private IPv6 address
    group: str | None = None


@dataclass(frozen=True)
class Directory:
    """What the resolver knows: started machines, each app's network, Flycast addresses."""

    machines: tuple[Machine, ...] = ()
    networks: Mapping[str, str] = field(default_factory=dict)  # app -> network key
    flycast: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # app -> addresses


@dataclass(frozen=True)
class Reply:
    outcome: Outcome
    aaaa: tuple[str, ...] = ()
    txt: tuple[str, ...] = ()


NXDOMAIN = Reply(Outcome.NXDOMAIN)
RECURSE = Reply(Outcome.RECURSE)


def answer(qname: str, qtype: str, network: str, directory: Directory, region: str) -> Reply:
    """The reply to ``qname``/``qtype`` (``AAAA``, ``TXT``, ``A``, ``ANY``...) for a machine of
    ``network`` asking the resolver of a host in ``region``."""
    labels = [label for label in qname.lower().rstrip(".").split(".") if label]
    if not labels or labels[-1] not in (INTERNAL, FLYCAST):
        return RECURSE
    apps = sorted(app for app, net in directory.networks.items() if net == network)
    if labels[-1] == FLYCAST:
        if len(labels) != 2 or labels[0] not in apps:
            return NXDOMAIN
        return _addresses(qtype, directory.flycast.get(labels[0], ()))
    if labels == ["_apps", INTERNAL]:
        return _text(qtype, ",".join(apps))
    if len(labels) < 2 or labels[-2] not in apps:
        return NXDOMAIN
    app, rest = labels[-2], labels[:-2]
    machines = sorted((m for m in directory.machines if m.app == app), key=lambda m: m.id)
    match rest:
        case []:
            return _addresses(qtype, [m.address for m in machines])
        case ["vms"]:
            return _text(qtype, ",".join(f"{m.id} {m.region}" for m in machines))
        case ["regions"]:
            return _text(qtype, ",".join(sorted({m.region for m in machines})))
        case [machine_id, "vm"]:
            found = [m.address for m in machines if m.id == machine_id]
            return _addresses(qtype, found) if found else NXDOMAIN
        case [group, "process"]:
            return _addresses(qtype, [m.address for m in machines if m.group == group])
        case [top, "nearest", "of"] if (count := TOP.fullmatch(top)) is not None:
            nearest = sorted(machines, key=lambda m: (m.region != region, m.region, m.id))
            return _addresses(qtype, [m.address for m in nearest[:int(count[1])]])
        case [one_region]:
            return _addresses(qtype, [m.address for m in machines if m.region == one_region])
    return NXDOMAIN


def _addresses(qtype: str, addresses: tuple[str, ...] | list[str]) -> Reply:
    wanted = qtype.upper() in ("AAAA", "ANY")
    return Reply(Outcome.ANSWER, aaaa=tuple(addresses) if wanted else ())


def _text(qtype: str, text: str) -> Reply:
    wanted = qtype.upper() in ("TXT", "ANY")
    return Reply(Outcome.ANSWER, txt=(text,) if wanted else ())
