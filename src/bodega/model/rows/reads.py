"""Typed reads of a view: ``view.rows(WorkerRow, region=...)`` beside ``view.rows("workers")``.

A view (a registry replica, the broker's catalog over it, a test's catalog in memory)
says how it finds documents (``_doc``, ``_docs``); this says, once for all of them, that
asking with a row model rather than a table name gets the rows as that model, a row the
model cannot read left out (and logged: ``model.answer.from_doc``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, overload

from bodega.model.answer import from_doc
from bodega.model.json import JsonObject
from bodega.model.rows.row import Row

R = TypeVar("R", bound=Row)
# A row's document as the registry stores and gossips it: JSON, the edge the models read
# (the registry's replication.rows.Document is the same alias).
Doc = JsonObject


def read_rows(model: type[R], docs: Iterable[Mapping[str, Any]]) -> list[R]:
    """The documents ``model`` can read, as ``model``; the others are logged and left out."""
    return [row for doc in docs if (row := from_doc(model, doc)) is not None]


class TypedReads:
    def _doc(self, table: str, key: str) -> Doc | None:
        raise NotImplementedError

    def _docs(self, table: str, without: Mapping[str, str | int] | None,
              filters: Mapping[str, str | int]) -> list[Doc]:
        raise NotImplementedError

    @overload
    def get(self, table: str, key: str) -> Doc | None: ...

    @overload
    def get(self, table: type[R], key: str) -> R | None: ...

    def get(self, table: str | type[R], key: str) -> Doc | R | None:
        if isinstance(table, str):
            return self._doc(table, key)
        return from_doc(table, self._doc(table.TABLE, key))

    @overload
    def rows(self, table: str, without: Mapping[str, str | int] | None = None, /,
             **filters: str | int) -> list[Doc]: ...

    @overload
    def rows(self, table: type[R], without: Mapping[str, str | int] | None = None, /,
             **filters: str | int) -> list[R]: ...

    def rows(self, table: str | type[R], without: Mapping[str, str | int] | None = None, /,
             **filters: str | int) -> list[Doc] | list[R]:
        """Live rows whose indexed columns equal ``filters`` and differ from ``without``:
        documents for a table's name, rows of a model for the model."""
        if isinstance(table, str):
            return self._docs(table, without, filters)
        return read_rows(table, self._docs(table.TABLE, without, filters))
