"""The bodega command line (flyctl's role): daemons, the local cluster, and API commands."""
