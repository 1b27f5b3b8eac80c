"""The vm isolation's pure core: the guest's configuration, qemu's command line and
launch record, and the steps of a migration read from what qemu says.

Its modules are imported by their own names.
"""

__all__: list[str] = []
