"""Which of the cluster's image registries to try, in which order; pure.

Every server host runs an image registry (``bodega up``, ``bodega join --server``),
and its workers advertise it in their ``workers`` rows (``WorkerRow.image_registry``).
A reference that names any of them names "the cluster's registry", whichever host it
was pushed through: the content is addressed by digest, so any registry holding it
serves the same bytes. Two readers order them:

- a worker pulling (``pull_order``): its own host's registry first (no network hop),
  then the one the reference names, then every other one its members' status calls
  live, then those it calls dead (the view may be behind; a refused connection costs
  little). A reference to a registry outside the cluster is pulled from there only.
- a client pushing (``push_order``, through ``GET /v1/cluster``): the broker's own
  host's registry first, then every other live one; dead ones not at all, so a push
  never waits on a lost host.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Advertised:
    """A registry a worker's row advertises, and whether membership calls that worker
    live (alive or suspect)."""

    registry: str
    live: bool


def _unique(registries: Iterable[str | None]) -> list[str]:
    seen: list[str] = []
    for registry in registries:
        if registry and registry not in seen:
            seen.append(registry)
    return seen


def cluster_registries(default: str | None, advertised: Sequence[Advertised]) -> set[str]:
    """Every registry that counts as the cluster's: the one a component was given at its
    start (``--image-registry``) and every one a worker advertises."""
    return set(_unique([default, *(a.registry for a in advertised)]))


def _live(advertised: Sequence[Advertised]) -> tuple[list[str], list[str]]:
    """Advertised registries split into live and dead, each sorted; one advertised by a
    live worker and a dead one (two workers on one host) is live."""
    live = sorted({a.registry for a in advertised if a.live})
    dead = sorted({a.registry for a in advertised if not a.live} - set(live))
    return live, dead


def pull_order(named: str, default: str | None, here: str | None,
               advertised: Sequence[Advertised]) -> list[str]:
    """The registries to pull ``named``'s image from, in order.

    ``default``: the registry the worker was given (``--image-registry``); ``here``: the
    one its own host serves, if any."""
    if named not in cluster_registries(default, advertised) and named != here:
        return [named]
    live, dead = _live(advertised)
    named_dead = named in dead
    return _unique([here, None if named_dead else named,
                    *(r for r in [default] if r not in dead), *live,
                    *dead])


def push_order(own: str | None, advertised: Sequence[Advertised]) -> list[str]:
    """The registries a push goes to, in order: ``own`` (the broker's host's, or the one
    it was given) unless a dead worker's row is all that advertises it, then every other
    live one."""
    live, dead = _live(advertised)
    return _unique([None if own in dead else own, *live])
