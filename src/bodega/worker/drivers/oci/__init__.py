"""The oci driver: a machine runs an OCI image with crun or runc, in the process driver's frame."""

from bodega.worker.drivers.oci.driver import OciDriver

__all__ = ["OciDriver"]
