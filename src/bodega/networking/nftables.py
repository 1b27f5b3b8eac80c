"""Applying an nftables script: in this process through libnftables, or with ``nft -f -``.

A worker writes its fences as it attaches machines, so every create of a machine
may write one; ``nft`` costs a fork and an exec each time (several milliseconds),
libnftables (the library ``nft`` itself is a thin command line over, installed with
it) well under one. The library is loaded once; a host without it falls back to the
command, with the same effect and the same error text.

libnftables contexts are not thread-safe: one context, one script at a time.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import threading

from bodega.networking.commands import CommandFailed, run

log = logging.getLogger("bodega.networking")

_LIBRARY = "libnftables.so.1"


class _Library:
    """libnftables through ctypes: a context whose output and errors are buffered."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        lib.nft_ctx_new.restype = ctypes.c_void_p
        lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
        for name in ("nft_ctx_buffer_output", "nft_ctx_buffer_error"):
            getattr(lib, name).argtypes = [ctypes.c_void_p]
        lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
        lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
        lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
        self.lib = lib
        self.ctx = lib.nft_ctx_new(0)  # NFT_CTX_DEFAULT
        if not self.ctx:
            raise OSError("nft_ctx_new failed")
        lib.nft_ctx_buffer_output(self.ctx)
        lib.nft_ctx_buffer_error(self.ctx)
        self.lock = threading.Lock()

    def apply(self, script: str) -> str | None:
        """None if the script applied; nft's error text if it did not."""
        with self.lock:
            code = self.lib.nft_run_cmd_from_buffer(self.ctx, script.encode())
            if code == 0:
                return None
            error: bytes | None = self.lib.nft_ctx_get_error_buffer(self.ctx)
            return (error or b"").decode(errors="replace").strip() or f"exit code {code}"


_loaded: _Library | None = None
_tried = False


def _library() -> _Library | None:
    global _loaded, _tried
    if not _tried:
        _tried = True
        try:
            _loaded = _Library(ctypes.CDLL(ctypes.util.find_library("nftables") or _LIBRARY))
        except OSError as exc:
            log.info("libnftables not loaded (%s): fences are written with the nft command",
                     exc)
    return _loaded


async def apply(script: str) -> None:
    """Apply ``script`` (``nft -f`` input) in one transaction; ``CommandFailed`` if refused."""
    library = _library()
    if library is None:
        await run("nft", "-f", "-", stdin=script.encode())
        return
    error = await asyncio.to_thread(library.apply, script)
    if error is not None:
        raise CommandFailed(f"nft -f - failed: {error}")
