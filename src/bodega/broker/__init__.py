"""The broker (flaps): the Machines API v1 and immediate-or-cancel placement; stateless."""

from bodega.broker.config import POLICIES, BrokerConfig
from bodega.broker.daemon import Broker

__all__ = [
    "POLICIES",
    "Broker",
    "BrokerConfig",
]
