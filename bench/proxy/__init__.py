"""Requests through the proxy against nginx and going direct: plain HTTP (``http``), the
TLS edge and TCP services (``edge``), and a request that starts a stopped machine
(``cold_start``)."""
