"""HAProxy's pure core: the layout of its backends and servers, the configuration
rendered from it, the TLS edge and the TCP layouts, and what a replay asks of it.
The supervisor and the runtime API beside it carry that to the running HAProxy.

Its modules are imported by their own names.
"""

__all__: list[str] = []
