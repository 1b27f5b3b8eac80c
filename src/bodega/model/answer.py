"""What every answer model shares: how it reads other components' JSON and how it is encoded.

An answer (a machine, a volume, a lease, an app ...) is built by the service that owns
the resource and read by whoever asked: the broker reads its workers' answers and the
registry's rows, the clients read the broker's (or Fly's own API's). Readers may be of
another version than the writer (a cluster upgraded one daemon at a time, a view that
outlives the daemons that wrote it), so an answer *ignores* fields it does not know,
where requests *forbid* them: a newer worker's extra field never breaks an older
broker, and the broker only ever says what its own models, and its OpenAPI document,
know of (docs/broker.md, "Typed answers").

Encoded, an answer leaves out every field it does not hold (``None``): an optional
field is absent from the JSON, never ``null``, which is what the Machines API's
strict clients expect. Answers are frozen: one read from a worker is shared by the
broker's caches, and a changed one is a copy (``model_copy(update=...)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bodega.model.json import JsonObject

if TYPE_CHECKING:
    from pydantic.main import IncEx

log = logging.getLogger("bodega.model.answer")
A = TypeVar("A", bound="Answer")


class Answer(BaseModel):
    # Each answer's validator and serializer are built when it is first used, not when its
    # module is imported: a command reads one or two of the dozens its modules define.
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    def wire(self, exclude: IncEx | None = None) -> bytes:
        """The answer as JSON, by pydantic's own encoder; ``exclude`` names fields to leave out."""
        return self.model_dump_json(exclude_none=True, exclude=exclude).encode()

    def doc(self) -> JsonObject:
        """The answer as a JSON document (a registry row is one), about to be written."""
        return self.model_dump(mode="json", exclude_none=True)


def wire_list(answers: Iterable[Answer], exclude: IncEx | None = None) -> bytes:
    """A JSON array of answers, each encoded as ``Answer.wire`` encodes it."""
    return b"[" + b",".join(answer.wire(exclude) for answer in answers) + b"]"


def from_doc(model: type[A], doc: Mapping[str, Any] | None) -> A | None:
    """A registry row's document as ``model``; None for no row, or for one the model cannot
    read (a field of another type, written by a daemon of another version): it is left
    out, and said so in the log, rather than failing every list it would be in."""
    if doc is None:
        return None
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        log.warning("ignoring a %s row that cannot be read (%r): %s", model.__name__,
                    doc.get("id"), exc.errors()[0].get("msg", "invalid"))
        return None
