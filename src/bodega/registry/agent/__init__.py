"""The registry agent (``bodega agent``): a host's one replica and SWIM member.

``daemon.py`` is the agent itself, ``listener.py`` its health and metrics routes; what a
host's processes use of it: ``hosted.py`` (``HostedNode``: reads the agent's view, hands
it rows; ``open_registry`` chooses it or a node of their own), ``link.py`` (their calls to
the agent), ``tenant.py`` (their membership through the agent's check-ins), and
``member_tls.py`` (a member's certificate, published and renewed).
"""

__all__: list[str] = []
