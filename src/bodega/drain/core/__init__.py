"""The drain and rebalance planners: pure decisions over the facts they are given."""
