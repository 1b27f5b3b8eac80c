"""Logging for daemons: one line per record, with the component that wrote it."""

from __future__ import annotations

import logging
import sys


def configure(level: str = "INFO", component: str = "bodega") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            f"%(asctime)s.%(msecs)03d %(levelname)-5s {component} %(name)s: %(message)s",
            datefmt="%Y-%m-%dT%H:%M:%S",
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("uvicorn", "uvicorn.error", "uvicorn.access", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
