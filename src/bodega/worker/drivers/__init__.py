"""Drivers run a machine's workload; one protocol, modelled on Nomad's task driver."""
