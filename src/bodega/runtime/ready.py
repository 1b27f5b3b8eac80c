"""What a daemon writes to its ready file once it serves: where it serves, as whom, how to
join it.

``bodega up`` (and the test kits) start daemons with ``--ready-file`` and wait for it
(``lifecycle.write_ready`` writes it at once, so a reader never sees half a file); the
supervisor reads it back (``Ready.read``) to learn each component's URL, and lists the
rest in ``cluster.json``. A reader ignores keys it does not know, as every reader of
another component's answer does (``model/answer.py``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

# Keys ``cluster.json`` lists apart (the component's own fields); the rest it lists as is.
OWN_FIELDS = frozenset({"url", "pid", "name", "region", "ready", "warnings"})


class Ready(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    pid: int | None = None
    url: str
    admin_url: str | None = None  # a proxy's admin API
    tls_url: str | None = None  # a proxy's TLS listener, when it has one
    internal_url: str | None = None  # a broker's internal listener (mutual TLS)
    name: str | None = None
    region: str | None = None
    ready: bool | None = None  # a broker's: false until it has heard from the cluster
    gossip: str | None = None  # host:port to join its registry through
    registry: str | None = None  # an image registry's host:port
    # What the component cannot do here (a worker without cgroups), for its supervisor to say.
    warnings: list[str] = []

    @classmethod
    def read(cls, path: Path) -> Ready:
        return cls.model_validate_json(path.read_bytes())

    def listed(self) -> dict[str, str]:
        """What ``cluster.json`` lists of it besides the component's own fields."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True).items()
                if k not in OWN_FIELDS}
