"""The autoscaler's pure decisions: how many machines an app wants and what to do for them
(``decide.py``), and which broker evaluates an app (``lease.py``)."""

from bodega.broker.autoscale.core.decide import Seen, Stimulus, decide
from bodega.broker.autoscale.core.lease import Sighting, Verdict, judge

__all__ = ["Seen", "Sighting", "Stimulus", "Verdict", "decide", "judge"]
