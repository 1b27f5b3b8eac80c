"""Releases on the wire (a bodega extension): what a deploy records, and what it reads back.

``POST /v1/apps/{app}/releases`` takes a ``CreateRelease`` (strict: the deploy
client and the broker ship together), ``PATCH .../releases/{version}`` a
``FinishRelease``; every route answers ``Release``. A release's ``config`` is
the whole ``bodega.toml`` as the deploy read it: a JSON document the broker
keeps as it came, for a rollback to deploy again.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from bodega.model.json import JsonObject
from bodega.model.rows import Row

Status = Literal["running", "complete", "failed", "interrupted"]
MAX_CONFIG_KEYS = 64


class CreateRelease(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strategy: str = Field(min_length=1, max_length=32)
    image: str = Field(min_length=1, max_length=512)
    config: JsonObject = Field(max_length=MAX_CONFIG_KEYS)  # bodega.toml: kept, not read
    user: str = Field(default="unknown", max_length=128)
    description: str | None = Field(default=None, max_length=512)
    base_dir: str | None = Field(default=None, max_length=4096)


class FinishRelease(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Status
    failure: str | None = Field(default=None, max_length=4096)


class Release(Row):
    """A release as its registry row holds it; answered without its row key (``id``)."""

    TABLE: ClassVar[str] = "releases"

    id: str | None = None  # the row's key, <app>/v<version>
    app: str = ""
    version: int = 0
    status: str = ""
    strategy: str = ""
    image: str = ""
    config: JsonObject = {}  # bodega.toml, as the deploy read it: kept and answered as it came
    user: str = ""
    description: str | None = None
    base_dir: str | None = None
    created_at: str = ""
    updated_at: str = ""
    failure: str | None = None

    def public(self) -> Release:
        return self.model_copy(update={"id": None})
