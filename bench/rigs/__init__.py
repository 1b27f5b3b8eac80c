"""What benches of several families run on: a real ``bodega up`` (``up_cluster``,
``placement_up``), the rig without gossip or proxy (``start_rig``, ``fleet``), the load
generator (``loadgen``), and the reads of a start's stages and of each role's CPU
(``start_stages``, ``up_usage``)."""
