"""bodega.drain: emptying a host before maintenance, and evening out a lopsided fleet.

The planners are pure (``core/``: the facts from the API's answers, the drain's plan, the
rebalance's plan scored with the simulator's measures, their ``--json`` reports); the
walk that carries a plan out, one move at a time through the move route, is
``steps.py``. The CLI runs both (``bodega host drain``, ``bodega cluster rebalance``).

Its modules are imported by their own names.
"""

__all__: list[str] = []
