"""The deploy's pure core: bodega.toml read as flyctl reads it (older shapes
rewritten, keys bodega leaves sifted out, the sections' models, the offline check
and its errors), the image build it names, each process group's machine config and
keys, drift between a machine and its config, the planner of deploy strategies and
scaling. The deployer, the executor and the health waits carry a plan out.

Its modules are imported by their own names.
"""

__all__: list[str] = []
