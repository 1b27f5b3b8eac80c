"""bodega: a market-style orchestrator.

Workers are the source of truth for their own hosts, a stateless broker
matches create requests to workers immediate-or-cancel, a gossip registry
spreads an eventually consistent view, and a proxy starts machines on demand.
"""

__version__ = "0.1.0"
