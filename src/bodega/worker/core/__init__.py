"""The worker's pure core: every rule about a machine, as ``decide(record, stimulus)``.

Its folder is its boundary: it imports nothing of the worker outside it. ``rules``
decides (with ``annotations``, ``policy``, ``suspend`` and ``checks``) over the typed
stimuli and decisions of ``decisions``; ``fsm`` declares each operation's state machine
and ``payloads`` what each carries; ``records`` holds the rows it reads. Each is imported
by its own name (``from bodega.worker.core.decisions import Start``); the package names
only ``decide``.
"""

from bodega.worker.core.rules import decide

__all__ = ["decide"]
