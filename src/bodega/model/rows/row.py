"""What every row model is: an answer that names the table it is a row of."""

from __future__ import annotations

from typing import ClassVar

from bodega.model.answer import Answer


class Row(Answer):
    TABLE: ClassVar[str]  # the replicated table (registry/.../schema.py) it is a row of
