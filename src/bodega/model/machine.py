"""The Machine object and its events, in the Fly Machines API's shape: fly-go's ``Machine``.

``Machine`` is the one answer every side of bodega passes around: the worker's renderer
builds it from its row (``worker/api/render.py``), the worker publishes it as its row in
the registry, the broker reads it from the worker's answers and the view's rows and
answers it to its clients, and ``MachinesClient`` returns it to the CLI and the deploy
client. Its fields are the API's (``Machine``, ``MachineEvent``, ``ImageRef``,
``CheckStatus``), in the order workers write them, then the ones a worker adds for the
cluster's own use (``app``, ``worker``, ``service_host``, ``network``: ``INTERNAL_FIELDS``), which
the broker never shows its clients. Fields are optional as in the API and as fly-go
reads them: a string the answer does not carry reads ``""``; an optional part
(``checks``, ``events``, ``nonce`` ...) reads ``None`` and is left out when encoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from bodega.model.answer import Answer
from bodega.model.machine_config import MachineConfig

# Defined beside the config that checks it; named here, where callers have long found it.
from bodega.model.machine_config import names_registry as names_registry
from bodega.model.rows.row import Row

# Fields a worker adds for the cluster's own use; public answers leave them out.
INTERNAL_FIELDS = frozenset({"app", "worker", "service_host", "network", "generation"})

_IMAGE_RE = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::\d+)?)/)?(?P<repository>[a-z0-9._/-]+?)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


class ImageRef(Answer):
    registry: str = ""
    repository: str = ""
    tag: str = ""
    digest: str = ""
    labels: dict[str, str] = {}


def image_ref(image: str) -> ImageRef:
    """Split ``registry/repository:tag@digest`` the way ``image_ref`` reports it."""
    match = _IMAGE_RE.match(image)
    if not match:
        return ImageRef(repository=image)
    registry = match.group("registry") or ""
    repository = match.group("repository")
    if registry and "." not in registry and ":" not in registry and registry != "localhost":
        # "library/alpine" style: the first part was a path segment, not a host.
        repository = f"{registry}/{repository}"
        registry = ""
    return ImageRef(
        registry=registry or "docker-hub-mirror.fly.io",
        repository=repository,
        tag=match.group("tag") or ("" if match.group("digest") else "latest"),
        digest=match.group("digest") or "",
    )


class ExitEvent(Answer):
    """How a run ended, as an ``exit`` event's ``request.exit_event`` says it."""

    exit_code: int = 0  # the worker writes -1 for a run that ended without one
    oom_killed: bool = False
    requested_stop: bool = False
    exited_at: str = ""
    signal: int | None = None

    @property
    def failed(self) -> bool:
        """The program failed: a non-zero code, a signal or the OOM killer, not a stop."""
        return not self.requested_stop and bool(self.exit_code or self.signal
                                                or self.oom_killed)

    def describe(self) -> str:
        """How the run ended, in words: ``exit code 1``, ``exit code 137, signal 9, OOM``."""
        return (f"exit code {self.exit_code}" + (f", signal {self.signal}" if self.signal else "")
                + (", killed for lack of memory (OOM)" if self.oom_killed else ""))


class EventRequest(BaseModel):
    """What an event carries beside its type and status (the API's ``request``).

    One of: how a run ended (an ``exit`` event); a failed step's ``error`` and ``step``;
    a check's ``name``, ``status`` and ``output``; and, with any of them, the ``reason``
    the worker began its own operation. The fields are in the order the worker has always
    written them, so an event reads back and is answered byte for byte as it was stored;
    a key this version does not know is kept (``extra="allow"``) and answered as it came.
    """

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    exit_event: ExitEvent | None = None
    error: str | None = None
    step: str | None = None
    reason: str | None = None
    name: str | None = None
    status: str | None = None
    output: str | None = None
    moved_from: str | None = None  # a move's event: the worker it left
    moved_to: str | None = None  # and the worker it went to
    migrated: str | None = None  # a live move's: "live" (memory and all) or "cold"
    downtime_ms: int | None = None  # and the time its guest did not run, if live


class MachineEvent(Answer):
    id: str = ""
    type: str = ""
    status: str = ""
    source: str = ""
    timestamp: int = 0  # milliseconds since the epoch
    request: EventRequest | None = None

    def exit_event(self) -> ExitEvent | None:
        """An ``exit`` event's ``exit_event``; None for any other event."""
        return None if self.request is None else self.request.exit_event

    def error(self) -> str | None:
        """The error a failed step recorded, if any."""
        return None if self.request is None else self.request.error

    def reason(self) -> str | None:
        """Why the worker began what the event records on its own (``host restarted``)."""
        return None if self.request is None else self.request.reason

    def trouble(self) -> str | None:
        """What this event says went wrong: a failed step's error, or a run that failed
        (its exit code, signal, OOM); None for an event that reports nothing wrong."""
        if (error := self.error()) is not None:
            return error
        exit_event = self.exit_event()
        return exit_event.describe() if exit_event is not None and exit_event.failed else None


class CheckStatus(Answer):
    name: str = ""
    status: str = ""
    output: str = ""
    updated_at: str = ""


class Machine(Row):
    TABLE: ClassVar[str] = "machines"  # its registry row, as its worker publishes it

    id: str = ""
    name: str = ""
    state: str = ""
    region: str = ""
    instance_id: str = ""
    version: str | None = None  # fly-go reads it beside instance_id
    private_ip: str = ""
    config: MachineConfig | None = None
    image_ref: ImageRef | None = None
    created_at: str = ""
    updated_at: str = ""
    host_status: str | None = None  # ok, unknown or unreachable
    app: str | None = None  # internal: the app it belongs to
    worker: str | None = None  # internal: the worker that owns it
    checks: list[CheckStatus] | None = None
    cordoned: bool | None = None  # bodega: present (true) only while cordoned
    events: list[MachineEvent] | None = None
    nonce: str | None = None  # a lease's, on a create that asked for one
    service_host: str | None = None  # internal: where the proxy reaches its services
    network: str | None = None  # internal: its private network's key (<org>/<network>)
    generation: int | None = None  # internal: its moves so far (the newest owner's row wins)
    # The last config the view had, on an answer for a machine whose host cannot be reached.
    incomplete_config: MachineConfig | None = None

    def public(self) -> Machine:
        """The machine as the broker's clients are shown it: without its internal fields."""
        return self.model_copy(update=dict.fromkeys(INTERNAL_FIELDS))

    def known_config(self) -> MachineConfig | None:
        """The config, or the last one known when its host cannot be reached."""
        return self.config or self.incomplete_config

    def metadata(self) -> dict[str, str]:
        config = self.known_config()
        return dict(config.metadata or {}) if config is not None else {}

    def standbys(self) -> tuple[str, ...]:
        """The machines this one stands by for (none for a machine that is no standby)."""
        config = self.known_config()
        return tuple(config.standbys or ()) if config is not None else ()

    def trouble(self) -> str | None:
        """Why the machine is down, when its newest event says something went wrong (a
        step's error, such as a program not found, or a failed run); None otherwise, and
        for an answer that carries no events (a list's)."""
        newest = max(self.events or [], key=lambda e: e.timestamp, default=None)
        return newest.trouble() if newest is not None else None


@dataclass(frozen=True)
class ExitStatus:
    """How a machine's main process ended."""

    exit_code: int | None
    signal: int | None = None
    oom_killed: bool = False
    requested_stop: bool = False
    exited_at: float = 0.0
    # The worker found the run already over when it started, with no word of how it ended:
    # its wrapper was killed with it, as a host that goes down (or a cluster killed whole)
    # kills every process. Not stored: it only decides what the worker does at that start.
    lost: bool = False

    @property
    def failed(self) -> bool:
        return self.oom_killed or self.signal is not None or (self.exit_code or 0) != 0

    def exit_event(self) -> ExitEvent:
        """The ``exit_event`` an ``exit`` event's request carries."""
        return ExitEvent(exit_code=self.exit_code if self.exit_code is not None else -1,
                         oom_killed=self.oom_killed, requested_stop=self.requested_stop,
                         exited_at=rfc3339(self.exited_at), signal=self.signal)


def rfc3339(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
