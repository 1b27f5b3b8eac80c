"""Machines: the service (reads with this broker's own writes laid over, calls relayed
to the owning worker), the create path, their routes, leases and logs, an org's list,
standbys and the watch that starts them. Imports placing, auth and the view.
Its modules are its surface: each is imported by its own name.
"""

__all__: list[str] = []
