"""The ``tokens`` row: an API token the brokers issued, by the hash of its secret (the
secret itself is never kept), written by any broker and read by every broker."""

from __future__ import annotations

from typing import ClassVar

from bodega.model.rows.row import Row


class TokenRow(Row):
    TABLE: ClassVar[str] = "tokens"

    id: str
    token_hash: str
    scope: str  # "admin", "app:<app>" or "kms:<app>" (its secret keys only)
    created_at: float = 0.0
    expires_at: float = 0.0  # 0: never
