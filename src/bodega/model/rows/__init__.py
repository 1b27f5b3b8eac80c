"""One model per replicated table: what its writers build and its readers get back.

The registry stores and gossips a row as a JSON document (``registry/.../rows.py``)
and knows of it only the indexed columns its schema names; what the document holds
is said here, once, for both sides: a writer builds the model and hands over its
``doc()``, a reader asks the view for the model (``view.rows(WorkerRow, region=...)``)
and gets rows it can read, a row it cannot (a field of another type, from a daemon of
another version) left out and logged rather than failing the whole read.
A row model reads as every answer does: it ignores fields it does not know, so rows
from newer peers keep parsing.

Tables and their models: ``workers`` ``WorkerRow``, ``apps`` ``AppRow``,
``ip_assignments`` ``IpAssignmentRow``, ``tokens`` ``TokenRow``, ``autoscale``
``AutoscaleRow`` and ``autoscale_runs`` ``AutoscaleRunRow`` here; ``machines``
and ``volumes`` the answer models a worker renders (``model.machine.Machine``,
``model.volume.Volume``) and ``releases`` the API's ``wire.releases.Release``, each a
``Row`` naming its table. The other tables are each written and read by one room,
with its model there: secrets and their keys (``broker/secrets/``), certificates
(``wire/internal/certificates.py``), the join book (``broker/trust/``), jobs and assignment
mode's workers (``worker/jobs/``, ``broker/jobs/``), the gossip keyring
(``registry/gossipkeys.py``).
"""

from __future__ import annotations

from bodega.model.rows.apps import AppRow
from bodega.model.rows.autoscale import AutoscaleRow, AutoscaleRunRow, Decision, Memory
from bodega.model.rows.ip_assignments import IpAssignmentRow
from bodega.model.rows.reads import Doc, TypedReads, read_rows
from bodega.model.rows.row import Row
from bodega.model.rows.tokens import TokenRow
from bodega.model.rows.workers import Free, HostTotals, HostUsage, OverlayAdvert, WorkerRow

__all__ = [
    "AppRow",
    "AutoscaleRow",
    "AutoscaleRunRow",
    "Decision",
    "Doc",
    "Free",
    "HostTotals",
    "HostUsage",
    "IpAssignmentRow",
    "Memory",
    "OverlayAdvert",
    "Row",
    "TokenRow",
    "TypedReads",
    "WorkerRow",
    "read_rows",
]
