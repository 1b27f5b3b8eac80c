"""Where a pull fetches from: any of the cluster's image registries that holds the image.

Every server host runs a registry and its workers advertise it in their rows
(``model/image_registries.py`` orders them). A reference naming any of them
(host 1's, say, which a deploy pushed through) is fetched from this host's own
registry first, then the named one, then the others, until one answers: a lost
host costs a refused connection, not the pull. Each cluster registry is reached
as the one given at the start is (``RegistryTrust``: the cluster CA, this
worker's certificate shown). ``advertised`` reads the view; until the worker has
one (and on a worker without), the given registry is the only one known.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bodega.model.image_registries import Advertised, cluster_registries, pull_order
from bodega.worker.images.registry_client import RegistryClient, RegistryTrust

Advertisements = Callable[[], Sequence[Advertised]]


class RegistrySources:
    def __init__(self, default: str | None, here: str | None = None,
                 trust: RegistryTrust | None = None) -> None:
        """``default``: ``--image-registry``; ``here``: the registry this worker's host
        serves, if it serves one; ``trust``: how the cluster's registries are reached."""
        self.default = default
        self.here = here
        self.trust = trust
        self._advertised: Advertisements = lambda: ()

    def attach(self, advertised: Advertisements) -> None:
        """Read the registries the cluster's workers advertise through ``advertised``."""
        self._advertised = advertised

    def order(self, named: str, client: RegistryClient) -> list[str]:
        """The registries to fetch ``named``'s image from, in order; each cluster
        registry trusted by ``client`` as the cluster's."""
        advertised = list(self._advertised())
        if self.trust is not None:
            for registry in cluster_registries(self.default, advertised) | {self.here}:
                if registry is None:
                    continue
                client.trusted.setdefault(registry, self.trust)
        return pull_order(named, self.default, self.here, advertised)
