"""bodega.sim: a trace-driven simulator of placement that runs bodega's own ranking code.

Pure: no sockets, no sleeps, no asyncio; deterministic under a seed. Regions
of heterogeneous hosts (``fleet``), a trace of arrivals (``workload`` makes
Fly-like ones, ``google`` loads Google's 2011 task events), brokers placing
concurrently through views a gossip delay old (``engine``), the policies
compared (``policies``), what is measured (``measures``), the comparison and
its sweeps (``compare``), and the supermarket model as a check of the
queueing arithmetic (``supermarket``). Plots live in ``plots``, the only
module that imports matplotlib.
"""
