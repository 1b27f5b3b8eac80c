"""What a broker tells its clients about the cluster: ``GET /v1/cluster``, a bodega extension.

Today one thing: where the cluster's image registry is (``bodega up`` runs one and tells its
broker), so `bodega build` and `bodega deploy` push to the registry of the cluster they
deploy to, never to one a local file names.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ClusterInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # host:port of the registry the cluster's workers pull from; None when it runs none.
    image_registry: str | None = None
