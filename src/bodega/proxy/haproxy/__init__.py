"""HAProxy as the proxy's data plane, with bodega's proxy as its control plane and activator."""
