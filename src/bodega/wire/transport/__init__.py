"""How bodega's calls travel, for the public and internal APIs alike.

The seam between a JSON client and an HTTP library (``seam.py``) and its two carriers
(``aiohttp_transport.py``: pooled sessions for daemons; ``stream_http.py``: asyncio's
streams for the command line), the JSON client over them (``json_client.py``), the HTTP
glue every server shares (``http.py``: the error shape, bounded bodies, bearer tokens;
``routing.py``; ``peer_access.py``: the role check of internal listeners), and the
WebSocket relays of port forwards and consoles. It knows neither API's bodies: it imports
nothing of ``wire.public`` or ``wire.internal``.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
