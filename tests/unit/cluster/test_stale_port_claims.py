"""Port claims a killed claimer left are stale; one a live process holds never is.

Real lock files in a temporary directory, held (flock) by this process as ``bodega
up`` and ``bodega join`` hold theirs; the holder is read from ``/proc/locks``.
"""

from __future__ import annotations

from pathlib import Path

from bodega.cluster.port_claims import PortClaims, network_namespace, remove_stale, stale


def test_only_claims_nobody_holds_are_stale_and_removed(tmp_path: Path) -> None:
    net = f"net{network_namespace()}"  # a claim names the network namespace it was made in
    live = PortClaims(lock_dir=tmp_path)
    assert live.take("udp", 24001)
    # A SIGKILL's, one of them from before claims named their namespace.
    for left in (f"udp-24002-{net}.lock", "tcp-24003.lock", f"udp-24004-{net}.lock"):
        (tmp_path / left).touch()
    for other in ("notes.txt", "udp-x.lock", "10.209.1.0-24.lock"):  # not claims
        (tmp_path / other).touch()
    assert stale(tmp_path) == [tmp_path / "tcp-24003.lock", tmp_path / f"udp-24002-{net}.lock",
                               tmp_path / f"udp-24004-{net}.lock"]

    found = stale(tmp_path)
    again = PortClaims(lock_dir=tmp_path)
    assert again.take("udp", 24004)  # claimed again between the look and the removal
    assert remove_stale(found) == [tmp_path / "tcp-24003.lock",
                                   tmp_path / f"udp-24002-{net}.lock"]
    assert sorted(p.name for p in tmp_path.glob("*p-24*.lock")) == [f"udp-24001-{net}.lock",
                                                                  f"udp-24004-{net}.lock"]
    assert stale(tmp_path) == []
    live.release()
    again.release()
    assert stale(tmp_path) == []  # released claims leave no file
    assert stale(tmp_path / "absent") == []
