"""``bodega up``: a whole cluster on one host, each component its own supervised process."""
