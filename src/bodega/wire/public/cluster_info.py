"""What a broker tells its clients about the cluster: ``GET /v1/cluster``, a bodega extension.

Today one thing: where the cluster's image registries are (every server host runs one, its
workers advertise it, and the broker lists the live ones, its own host's first), so `bodega
build` and `bodega deploy` push to the registries of the cluster they deploy to, never to
one a local file names; and the CA their certificates chain to (the cluster's), which they
check them by. That CA comes over the same link the token already travels, so trusting it
asks no more of that link than sending the token does.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ClusterInfo(BaseModel):
    # An answer: a client of another version reads what it knows of it (model/answer.py).
    model_config = ConfigDict(extra="ignore")
    # host:port of the registry the cluster's workers pull from; None when it runs none.
    image_registry: str | None = None
    # The CA (PEM) its certificate chains to; None: it serves plain HTTP (a cluster
    # without internal TLS, on loopback).
    image_registry_ca: str | None = None
    # Every live registry of the cluster (each server host runs one), this broker's
    # host's first: a push goes to each (docs/images.md); ``image_registry`` is the first.
    # Empty from a broker that lists none (an older one): ``image_registry`` alone.
    image_registries: list[str] = []
