"""The worker's host: what it makes on the machine it runs on, and how it names it.

``network`` gives each machine its address (a namespace, veth and bridge as
root); ``secret_env`` an app's secrets for a launch; ``parts`` and
``image_drivers`` the driver and network a config asks for; ``survey`` reads
what the host holds and ``sweep`` removes a cluster's. Pure, in ``core/``:
``names`` names every kernel object with the cluster id, ``identity`` the user a
machine runs as.

Internal to the worker: import from the modules (the worker's surface is
``bodega.worker``).
"""

__all__: list[str] = []
