"""``bodega up``: a whole cluster on one host, each component its own supervised process."""

from bodega.cluster.components import components_for
from bodega.cluster.config import ClusterConfig
from bodega.cluster.supervisor import LocalCluster, StartFailed

__all__ = [
    "ClusterConfig",
    "LocalCluster",
    "StartFailed",
    "components_for",
]
