"""OCI images on a worker: references, the pull plan, the content-addressed store, the puller."""

from bodega.worker.images.core.eviction import CachedImage
from bodega.worker.images.core.manifest import BadImage
from bodega.worker.images.core.reference import (
    BadReference,
    ImageReference,
    parse_reference,
)
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient, RegistryError, RegistryTrust
from bodega.worker.images.store import ImageStore

__all__ = [
    "BadImage",
    "BadReference",
    "CachedImage",
    "ImageReference",
    "ImageStore",
    "Puller",
    "RegistryClient",
    "RegistryError",
    "RegistryTrust",
    "parse_reference",
]
