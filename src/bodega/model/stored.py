"""A part of a machine config that still loads as it was stored before bodega checked it.

A worker reads a machine's stored config with ``context={"stored": True}``. A part whose
keys bodega once kept as sent (a check before unknown keys were refused; files and
statics before they had models) then loads without the keys its model does not know,
instead of failing the machine's load; a client's config is still refused for them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationInfo, model_validator


class ReadsStored(BaseModel):
    @model_validator(mode="before")
    @classmethod
    def _stored_keeps_reading(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and info.context and info.context.get("stored"):
            return {k: v for k, v in data.items() if k in cls.model_fields}
        return data
