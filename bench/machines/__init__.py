"""One machine's life against the bare runtime: create+start on ``bodega up`` against a
bare spawn (``start``), images against runc and podman, suspend, the isolations, and the
parts a start is made of (the launch chain, the user switch, internal TLS, an app's list)."""
