"""Reads of the worker's log: a machine's events and the audit trail of what the worker did.

``Store`` is a ``LogReader``; these read the committed log straight from SQLite
and never write.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from bodega.model.json import JsonObject
from bodega.model.machine import MachineEvent


@dataclass(frozen=True)
class LogEntry:
    seq: int
    op_id: str
    resource_id: str
    fsm: str
    step: str
    # Read from the log's JSON and answered as JSON (the worker's /log): kept as they came.
    payload: JsonObject
    event: JsonObject | None
    at: float


class LogReader:
    db: sqlite3.Connection

    def events(self, resource_id: str, limit: int = 50) -> list[MachineEvent]:
        """A machine's events, newest first, read straight from the log."""
        rows = self.db.execute(
            "SELECT event FROM ops WHERE resource_id = ? AND event IS NOT NULL "
            "ORDER BY seq DESC LIMIT ?",
            (resource_id, limit),
        ).fetchall()
        return [MachineEvent.model_validate_json(row[0]) for row in rows]

    def history(self, resource_id: str | None = None, limit: int = 1000) -> list[LogEntry]:
        """Log entries, oldest first: the audit trail of what this worker did."""
        if resource_id is None:
            rows = self.db.execute(
                "SELECT * FROM (SELECT * FROM ops ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                (limit,),
            ).fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM ops WHERE resource_id = ? ORDER BY seq LIMIT ?",
                (resource_id, limit),
            ).fetchall()
        return [
            LogEntry(
                seq=row["seq"], op_id=row["op_id"], resource_id=row["resource_id"],
                fsm=row["fsm"], step=row["step"], payload=json.loads(row["payload"]),
                event=json.loads(row["event"]) if row["event"] else None, at=row["at"],
            )
            for row in rows
        ]
