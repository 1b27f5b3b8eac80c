"""Creates through the broker's public API against the server stack's ceiling
(``creates``)."""
