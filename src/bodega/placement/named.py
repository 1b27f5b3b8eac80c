"""The placement policies a broker can be told to run, by name, and which one is the default.

    utility   bodega's curves: prefer hosts 30-80 % used after placing (the default)
    fgd       the same curves plus the fragmentation term (``fragmentation.py``): each
              machine keeps off the scarce holes of the bigger shapes the region is
              asked for
    binpack   Nomad's ScoreFitBinPack: the fullest host that fits
    spread    Nomad's spread: the emptiest host

The broker (``--policy``, ``--shadow-policy``) and the simulator
(``bodega sim compare --policies default,...``) both read the names here, so
``default`` in a simulation is always what a broker runs when told nothing.
Curves and weights are the operator's; ``fgd`` sets the ``fragmentation``
weight to ``FGD_WEIGHT`` unless the weights already give it a positive one.
``fgd`` is not the default: on the simulator's traces it cuts the
rejections that fragmentation causes but not rejections overall
(docs/scheduling.md); a broker can rank it in shadow to compare on real
traffic (``--shadow-policy fgd``).
"""

from __future__ import annotations

from dataclasses import replace

from bodega.placement.curves import BALANCED, ROOMY, Curve
from bodega.placement.scorers import BinPackScorer, Scorer, SpreadScorer, UtilityScorer, Weights

DEFAULT_POLICY = "utility"
POLICY_NAMES = ("utility", "fgd", "binpack", "spread")
FGD_WEIGHT = 1.0  # a scarce slot weighs the curves' whole range


def scorer_named(name: str, weights: Weights | None = None, cpu: Curve = BALANCED,
                 memory: Curve = BALANCED, disk: Curve = ROOMY) -> Scorer:
    """The scorer of policy ``name`` with the operator's weights and curves; ValueError
    naming the known policies otherwise."""
    w = weights or Weights()
    if name == "fgd":
        return UtilityScorer(cpu, memory, disk,
                             replace(w, fragmentation=w.fragmentation or FGD_WEIGHT), name="fgd")
    if name == "utility":
        return UtilityScorer(cpu, memory, disk, w)
    if name == "binpack":
        return BinPackScorer(w)
    if name == "spread":
        return SpreadScorer(w)
    raise ValueError(f"unknown placement policy {name!r}: use " + ", ".join(POLICY_NAMES))
