"""The vm isolation: an image machine booted by qemu's microvm with bodega's kernel and
init, run by the oci driver (``machines.py``; docs/isolation.md)."""

__all__: list[str] = []  # its modules are imported by their names (oci driver, host probe)
