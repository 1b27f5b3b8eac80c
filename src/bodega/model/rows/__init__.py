"""One model per replicated table: what its writers build and its readers get back.

The registry stores and gossips a row as a JSON document (``registry/.../rows.py``)
and knows of it only the indexed columns its schema names; what the document holds
is said here, once, for both sides: a writer builds the model and hands over its
``doc()``, a reader asks the view for the model (``view.rows(WorkerRow, region=...)``)
and gets rows it can read, a row it cannot (a field of another type, from a daemon of
another version) left out and logged rather than failing the whole read.
A row model reads as every answer does: it ignores fields it does not know, so rows
from newer peers keep parsing.

Tables and their models: ``workers`` ``WorkerRow``; ``machines`` ``model.machine.Machine``;
``volumes`` ``model.volume.Volume``; ``apps`` ``AppRow``; ``ip_assignments``
``IpAssignmentRow``. The other tables' rows are read
by one room each, with its own model beside it (``broker/view/``, ``broker/secrets/``,
``broker/trust/``, ``worker/jobs/``).
"""

from __future__ import annotations

from bodega.model.rows.apps import AppRow
from bodega.model.rows.ip_assignments import IpAssignmentRow
from bodega.model.rows.reads import Doc, TypedReads, read_rows
from bodega.model.rows.row import Row
from bodega.model.rows.workers import Free, HostTotals, HostUsage, OverlayAdvert, WorkerRow

__all__ = [
    "AppRow",
    "Doc",
    "Free",
    "HostTotals",
    "HostUsage",
    "IpAssignmentRow",
    "OverlayAdvert",
    "Row",
    "TypedReads",
    "WorkerRow",
    "read_rows",
]
