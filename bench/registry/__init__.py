"""The gossip registry: spread, failure detection and bytes on real UDP against theory
(``gossip``, with the packet protections in ``envelopes``), and the registry at fleet scale
in the simulators (``scale``, with ``rows`` and ``agents``)."""
