"""Two clusters on one host never share a machine /24: the second is refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bodega.cluster.machine_range import MachineRangeTaken, claim, same_size_ranges

FIRST = ["10.209.1.0/24", "10.209.2.0/24"]


def test_a_held_range_is_refused_naming_the_flag_the_holder_and_a_free_range(
        tmp_path: Path) -> None:
    held = claim("10.209.0.0/16", FIRST, Path("/srv/one"), lock_dir=tmp_path)
    try:
        with pytest.raises(MachineRangeTaken) as refused:
            claim("10.209.0.0/16", FIRST, Path("/srv/two"), lock_dir=tmp_path)
        message = str(refused.value)
        assert "\n" not in message
        assert message == (
            "machine range 10.209.0.0/16 overlaps 10.209.1.0/24, used by the bodega cluster "
            f"in /srv/one (pid {os.getpid()}); give this cluster another range with "
            "--machine-cidr, e.g. --machine-cidr 10.210.0.0/16")
        # Another range is fine at the same time.
        claim("10.210.0.0/16", ["10.210.1.0/24"], Path("/srv/two"), lock_dir=tmp_path).release()
    finally:
        held.release()


def test_an_overlapping_range_of_another_size_is_refused_too(tmp_path: Path) -> None:
    held = claim("10.209.0.0/16", FIRST, Path("/srv/one"), lock_dir=tmp_path)
    try:
        with pytest.raises(MachineRangeTaken, match=r"overlaps 10\.209\.2\.0/24"):
            claim("10.209.0.0/22", ["10.209.2.0/24"], Path("/srv/two"), lock_dir=tmp_path)
    finally:
        held.release()


def test_a_released_range_is_free_again_and_a_failed_claim_holds_nothing(
        tmp_path: Path) -> None:
    other = claim("10.209.0.0/16", ["10.209.2.0/24"], Path("/srv/one"), lock_dir=tmp_path)
    with pytest.raises(MachineRangeTaken):
        claim("10.209.0.0/16", FIRST, Path("/srv/two"), lock_dir=tmp_path)
    other.release()
    # 10.209.1.0/24, locked before the refusal, was let go with it.
    claim("10.209.0.0/16", FIRST, Path("/srv/two"), lock_dir=tmp_path).release()


def test_suggestions_are_same_size_private_ranges_after_it() -> None:
    assert list(same_size_ranges("10.209.0.0/16"))[:2] == ["10.210.0.0/16", "10.211.0.0/16"]
    assert next(iter(same_size_ranges("10.255.0.0/16"))) == "10.0.0.0/16"
    assert list(same_size_ranges("192.168.0.0/16")) == []
