"""The autoscaler (a bodega extension): an app's setting and its routes (``routes.py``),
every broker's evaluation loop (``evaluator.py``), its pure decisions (``core/``)."""

from bodega.broker.autoscale.evaluator import Evaluator
from bodega.broker.autoscale.routes import AutoscaleSettings, autoscale_routes

__all__ = ["AutoscaleSettings", "Evaluator", "autoscale_routes"]
