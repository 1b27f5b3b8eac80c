"""fly-replay: a machine answers "send this request elsewhere", and the proxy does, once. Pure.

A response header ``fly-replay: region=syd`` (or ``instance=<id>``,
``app=<name>``, ``elsewhere=true``, with an optional ``state=<s>``) asks the
proxy to send the same request to a machine so named instead of returning
the response. On the HAProxy data plane a small Lua action sees the header,
and hands the request (its method, path, headers and body, when the body fit
HAProxy's buffer) to bodega's proxy with ``x-bodega-replay: <the header's
value>;src=<the answering machine's address>``; bodega's proxy picks the
target here and adds ``fly-replay-src`` (``instance=<id>;region=<r>;state=<s>``)
so the target knows where it came from. The target's answer goes to the
client as it is, even if it asks for a replay again: a request is replayed
once, so two machines pointing at each other cannot loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bodega.proxy.core.routes import Backend

INSTRUCTION = b"x-bodega-replay"  # from HAProxy's Lua action to bodega's proxy, never a client
SOURCE = b"fly-replay-src"


@dataclass(frozen=True)
class ReplayTo:
    region: str | None = None
    instance: str | None = None
    app: str | None = None
    elsewhere: bool = False
    state: str | None = None
    source: str | None = None  # host:port of the machine that asked


def parse_replay(value: str) -> ReplayTo:
    """``region=syd;state=x;src=10.0.0.2:8080`` (fields as fly-replay writes them; ``,``
    separates them too); unknown fields are ignored, as fly-proxy does."""
    fields: dict[str, str] = {}
    for part in value.replace(",", ";").split(";"):
        key, _, val = part.strip().partition("=")
        if key and val:
            fields[key.strip().lower()] = val.strip()
    return ReplayTo(region=fields.get("region"), instance=fields.get("instance"),
                    app=fields.get("app"), elsewhere=fields.get("elsewhere") == "true",
                    state=fields.get("state"), source=fields.get("src"))


def source_of(replay: ReplayTo, backends: Iterable[Backend]) -> Backend | None:
    """The machine that asked for the replay, by the address HAProxy reached it at."""
    return next((b for b in backends if f"{b.host}:{b.port}" == replay.source), None)


def candidates(replay: ReplayTo, backends: Iterable[Backend],
               source: Backend | None) -> list[Backend]:
    """The machines the replay may go to (of the target app, whose ``backends`` these are)."""
    out = list(backends)
    if replay.instance:
        out = [b for b in out if b.machine_id == replay.instance]
    if replay.region:
        out = [b for b in out if b.region == replay.region]
    if replay.elsewhere and source is not None:
        out = [b for b in out if b.machine_id != source.machine_id]
    return out


def source_header(replay: ReplayTo, source: Backend | None) -> bytes:
    parts = []
    if source is not None:
        parts += [f"instance={source.machine_id}", f"region={source.region}"]
    if replay.state:
        parts.append(f"state={replay.state}")
    return ";".join(parts).encode()
