"""Which apps' requests the edge answers from their machines' images: the statics table.

Kept from the same machine rows as the routing table. A machine with served
``statics`` (``model/statics.py``: not a Tigris bucket's) and an image is a
*source*: any worker holding one can serve the files, whatever the machine's
state, so a request for a static never wakes a machine. ``lookup`` says, for a
request's path, the file it names (or why none) and the sources to ask,
started machines first (their images are surely on their workers), each
worker once. An app's sources may disagree on statics during a deploy; the
newest release's config is the one a request is matched against (the machine
updated last), as the newest machines are the ones a rolling deploy keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bodega.model.machine import Machine
from bodega.model.machine_config import names_registry
from bodega.model.statics import Refuse, Serve, Static, find, served


@dataclass(frozen=True)
class Source:
    machine_id: str
    app: str
    worker: str
    state: str
    updated_at: str
    statics: tuple[Static, ...]


@dataclass(frozen=True)
class Lookup:
    found: Serve | Refuse
    sources: tuple[Source, ...]  # to ask in turn


def source_of(machine: Machine) -> Source | None:
    """The source a machine's row describes, or None when it has no statics to serve."""
    config = machine.config
    if config is None or machine.state == "destroyed" or not machine.app \
            or not machine.worker or not names_registry(config.image):
        return None
    statics = tuple(served(config.statics or []))
    if not statics:
        return None
    return Source(machine.id, machine.app, machine.worker, machine.state, machine.updated_at,
                  statics)


class StaticsTable:
    def __init__(self) -> None:
        self._by_app: dict[str, dict[str, Source]] = {}
        self._app_of: dict[str, str] = {}
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after a change of any app's prefixes (HAProxy's map follows)."""
        self._listeners.append(listener)

    def put_machine(self, machine_id: str, machine: Machine | None) -> None:
        """A machine's row changed (None: it is gone)."""
        source = source_of(machine) if machine is not None else None
        apps = {self._app_of.get(machine_id), source.app if source else None} - {None}
        before = {app: self._prefixes(app) for app in apps if app}
        app = self._app_of.pop(machine_id, None)
        if app is not None:
            sources = self._by_app[app]
            del sources[machine_id]
            if not sources:
                del self._by_app[app]
        if source is not None:
            self._by_app.setdefault(source.app, {})[machine_id] = source
            self._app_of[machine_id] = source.app
        if any(self._prefixes(app) != prefixes for app, prefixes in before.items()):
            for listener in self._listeners:
                listener()

    def serves(self, app: str) -> bool:
        """Whether ``app`` has statics at all (most have none: their requests pay no more)."""
        return app in self._by_app

    def lookup(self, app: str, path: str,
               worker_alive: Callable[[str], bool] = lambda _: True) -> Lookup | None:
        """The file ``path`` (decoded) names through ``app``'s statics and whom to ask,
        or None when no static of the app holds it (the request is the machines')."""
        sources = list(self._by_app.get(app, {}).values())
        if not sources:
            return None
        newest = max(sources, key=lambda s: (s.updated_at, s.machine_id))
        found = find(newest.statics, path)
        if found is None:
            return None
        alike = [s for s in sources if s.statics == newest.statics and worker_alive(s.worker)]
        alike.sort(key=lambda s: (s.state != "started", s.machine_id != newest.machine_id))
        asked: dict[str, Source] = {}
        for source in alike:
            asked.setdefault(source.worker, source)
        return Lookup(found, tuple(asked.values()))

    def prefixes(self) -> dict[str, frozenset[str]]:
        """Every app's url prefixes, as its newest machine's statics say."""
        return {app: self._prefixes(app) for app in self._by_app}

    def _prefixes(self, app: str) -> frozenset[str]:
        sources = self._by_app.get(app)
        if not sources:
            return frozenset()
        newest = max(sources.values(), key=lambda s: (s.updated_at, s.machine_id))
        return frozenset(s.url_prefix for s in newest.statics)
