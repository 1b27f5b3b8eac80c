"""The oci driver's pure core: the OCI runtime spec of a machine (its bundle), which
runtime runs it and how it is called, and what each isolation asks of the host.

Its modules are imported by their own names.
"""

__all__: list[str] = []
