"""What a refusal says beside its message and code: its ``details``, one model per kind.

A service refuses with a ``BodegaError``; what it adds for its caller to act on is one
of these, sent as the error's ``details`` object and read back by the caller's client
(``model.errors.from_wire``) as the same model:

- ``NoRoom``: a worker cannot take an ask: what it has free and what was asked, or
  that it is full whatever its figures say (no machine address left). The placer
  believes it over the view until the worker's next row (``broker/view/candidates.py``).
- ``RetryLater``: a queue is full; when to ask again.
- ``OtherHome``: a job's submit reached a worker that is not its home: which is.
- ``Unplaced``: no worker of the asked regions took a create; the placement's record.

A refusal keeps what it does not know (``extra="allow"``) rather than dropping it: a
broker passing a worker's refusal on (``broker/apps/delete.py``) passes it whole, and
a refusal from a peer of a newer version still reads.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ConfigDict, ValidationError

from bodega.model.answer import Answer
from bodega.model.capacity import Ask
from bodega.model.rows.workers import Free


class RefusalDetails(Answer):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class NoRoom(RefusalDetails):
    free: Free | None = None  # what the worker had free when it said no
    asked: Ask | None = None
    full: bool | None = None  # True: full whatever the figures say; None: they tell


class OtherHome(RefusalDetails):
    home: str  # the worker that is the job's home, as the refusing worker's view has it


class RetryLater(RefusalDetails):
    retry_after: float  # seconds


class Unplaced(RefusalDetails):
    # The placement's record as the broker answers it (``wire/public/placement.py``'s
    # ``PlacementRecord``), kept as its JSON: only clients read it, below the wire's models.
    placement: dict[str, object]


def refusal_of(details: object) -> RefusalDetails | None:
    """A refusal's ``details`` as its model, picked by what it holds; one that reads as no
    kind bodega knows is kept as a plain ``RefusalDetails``."""
    if not isinstance(details, Mapping):
        return None
    kind: type[RefusalDetails] = RefusalDetails
    if "retry_after" in details:
        kind = RetryLater
    elif "placement" in details:
        kind = Unplaced
    elif details.keys() & {"free", "asked", "full"}:
        kind = NoRoom
    elif "home" in details:
        kind = OtherHome
    try:
        return kind.model_validate(details)
    except ValidationError:
        return RefusalDetails.model_validate(details)
