"""The command line's own time: a command against a bare Python start (``startup``), and
a deploy's client (``deploy``)."""
