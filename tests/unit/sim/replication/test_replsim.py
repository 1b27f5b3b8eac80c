"""The replication simulator's own bookkeeping: what it calls converged."""

from __future__ import annotations

from bodega.sim.replication.replsim import ReplicaNet
from tests.unit.registry.replication.row_kit import machine_doc


def test_replicas_holding_the_same_rows_stored_in_other_orders_are_converged() -> None:
    rn = ReplicaNet(1)
    for name in ("w", "a", "b"):
        rn.add(name)
    rows = []
    for i in range(60):
        change = rn.replicas["w"].write("machines", f"m{i}", machine_doc(f"m{i}", "w"),
                                        shared=False)
        assert change is not None
        assert change.new is not None
        rows.append(change.new)
    rn.replicas["a"].apply(rows)
    rn.replicas["b"].apply(rows[::-1])
    assert rn.fingerprint("a") == rn.fingerprint("b")
    assert rn.converged(["a", "b"])
    gone = rn.replicas["w"].write("machines", "m0", None, shared=False)
    assert gone is not None
    assert gone.new is not None
    rn.replicas["a"].apply([gone.new])
    assert not rn.converged(["a", "b"])
