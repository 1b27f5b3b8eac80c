"""What a node remembers about membership across restarts: its generation and peers.

The generation rises by one on every process start, so the cluster can tell
a restarted member from the one it declared dead. The peer list lets a node
whose seeds are gone rejoin through anyone it knew, and the peers' metadata
(where their HTTP APIs are) lets a node that cannot gossip yet (it missed a
key rotation while it was away) reach them another way. If a crash loses the
latest write, the node starts with an older generation; hearing itself
declared dead (or a newer generation of itself) makes it move past it, so
the loss costs one extra rejoin, never a stuck member.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from bodega.registry.membership.core.members import Addr
from bodega.runtime.lifecycle import write_json_atomic

log = logging.getLogger("bodega.registry.statefile")


@dataclass(frozen=True)
class SavedState:
    generation: int = 0
    peers: dict[str, Addr] = field(default_factory=dict)  # member name -> gossip address
    meta: dict[str, dict[str, str]] = field(default_factory=dict)  # member name -> metadata


class StateFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> SavedState:
        """The saved state; an empty one if the file is missing or unreadable."""
        try:
            doc = json.loads(self.path.read_text())
            peers = {str(name): (str(host), int(port))
                     for name, (host, port) in doc.get("peers", {}).items()}
            meta = {str(name): {str(k): str(v) for k, v in fields.items()}
                    for name, fields in doc.get("meta", {}).items()}
            return SavedState(int(doc["generation"]), peers, meta)
        except FileNotFoundError:
            return SavedState()
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("ignoring unreadable membership state %s: %s", self.path, e)
            return SavedState()

    def save(self, state: SavedState) -> None:
        write_json_atomic(self.path, {
            "generation": state.generation,
            "peers": {name: [host, port] for name, (host, port) in sorted(state.peers.items())},
            "meta": dict(sorted(state.meta.items())),
        })
