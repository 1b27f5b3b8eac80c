"""The join book as one host kept it in a file, before the cluster view held it.

``<ca dir>/join-book.json`` (0600): the tokens as records
(``join_token.TokenRecord``: the secret's hash, never the secret) and each
joined worker's machine subnet. Nothing writes it any more; a server's broker
imports one it finds into the view at its start (``broker/trust/join_book.py``).
``JoinBook`` is also the shape the view's book is read into.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.runtime.tls.core.join_token import TokenRecord

BOOK = "join-book.json"


class JoinBook(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: dict[str, TokenRecord] = {}
    subnets: dict[str, str] = {}  # joined worker name -> its machine subnet


def read_book(path: Path) -> JoinBook | None:
    """The book in ``path``; None if there is none."""
    try:
        return JoinBook.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
