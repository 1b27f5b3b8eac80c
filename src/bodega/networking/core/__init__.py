"""The private network's pure core: the address plan, the resolver's names and
directory, the fence between networks, the overlay's peers, whose each kernel
object is.

Its modules are imported by their own names.
"""

__all__: list[str] = []
