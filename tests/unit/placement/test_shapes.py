"""The recent mix of shapes a broker notes per region: shares, decay, limits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.model.capacity import Ask
from bodega.placement.shapes import ShapeMix

SMALL = Ask(cpu_kind="shared", cpus=1, memory_mb=256)
BIG = Ask(cpu_kind="performance", cpus=8, memory_mb=16384)


def test_shares_are_the_mix_of_what_was_asked() -> None:
    mix = ShapeMix(memory=10_000)
    for _ in range(3):
        mix.note(SMALL)
    mix.note(BIG)
    shares = mix.shares()
    assert shares[(False, 1, 256)] == pytest.approx(0.75, abs=1e-3)
    assert shares[(True, 8, 16384)] == pytest.approx(0.25, abs=1e-3)
    columns = mix.columns()
    assert list(columns.performance) == [False, True]
    assert list(columns.cpus) == [1.0, 8.0]
    assert columns.share.sum() == pytest.approx(1.0)


def test_older_creates_fade_so_the_mix_follows_the_traffic() -> None:
    mix = ShapeMix(memory=100)
    for _ in range(1000):
        mix.note(BIG)
    for _ in range(300):  # three memories of small creates: the big ones are nearly gone
        mix.note(SMALL)
    assert mix.shares()[(True, 8, 16384)] < 0.1
    assert mix.shares()[(False, 1, 256)] > 0.9


def test_machines_with_gpus_or_no_cpus_are_left_out() -> None:
    mix = ShapeMix()
    mix.note(Ask(cpu_kind="performance", cpus=8, memory_mb=16384, gpus=1, gpu_kind="a100"))
    mix.note(Ask(cpus=0, memory_mb=0, disk_gb=10))  # a volume's ask
    assert mix.shares() == {}
    assert len(mix.columns()) == 0


def test_the_rarest_shape_is_forgotten_beyond_the_limit() -> None:
    mix = ShapeMix(memory=1000, limit=2)
    for _ in range(5):
        mix.note(SMALL)
    mix.note(BIG)
    mix.note(Ask(cpu_kind="shared", cpus=2, memory_mb=2048))  # a third shape: one must go
    assert len(mix.shares()) == 2
    assert (False, 1, 256) in mix.shares()


def test_a_bad_memory_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ShapeMix(memory=0)


asks = st.builds(Ask, cpu_kind=st.sampled_from(["shared", "performance"]),
                 cpus=st.integers(1, 16), memory_mb=st.sampled_from([256, 1024, 4096, 32768]))


@given(st.lists(asks, min_size=1, max_size=300), st.integers(1, 50), st.integers(1, 8))
def test_shares_always_sum_to_one_and_the_last_shape_is_kept(
        noted: list[Ask], memory: int, limit: int) -> None:
    mix = ShapeMix(memory=memory, limit=limit)
    for ask in noted:
        mix.note(ask)
    shares = mix.shares()
    assert sum(shares.values()) == pytest.approx(1.0)
    assert all(share > 0 for share in shares.values())
    assert len(shares) <= limit
    last = noted[-1]
    assert (last.cpu_kind == "performance", last.cpus, last.memory_mb) in shares
