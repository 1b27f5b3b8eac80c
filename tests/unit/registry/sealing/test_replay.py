"""Replay windows: each sender's packets let in once, its restarts let in, its past refused."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bodega.registry.sealing.core.replay import WINDOW, ReplayGuard, Window

A, B = b"sender-a", b"sender-b"


def let_in(guard: ReplayGuard, sender: bytes, generation: int, seq: int) -> bool:
    """What the envelope does: ask, and record only what it lets in."""
    if not guard.fresh(sender, generation, seq):
        return False
    guard.accept(sender, generation, seq)
    return True


def test_in_order_every_packet_is_let_in_once() -> None:
    guard = ReplayGuard()
    assert [let_in(guard, A, 1, s) for s in range(100, 110)] == [True] * 10
    assert [let_in(guard, A, 1, s) for s in range(100, 110)] == [False] * 10


def test_out_of_order_within_the_window_is_let_in_and_only_once() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 1, 1000)
    assert let_in(guard, A, 1, 990)  # late, inside the window
    assert let_in(guard, A, 1, 1000 - WINDOW + 1)  # the oldest the window still holds
    assert not let_in(guard, A, 1, 990)
    assert not let_in(guard, A, 1, 1000)
    assert let_in(guard, A, 1, 995)  # never seen: a gap is not a replay


def test_a_duplicate_is_refused() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 1, 5)
    assert not let_in(guard, A, 1, 5)


def test_too_old_to_tell_is_refused() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 1, 10_000)
    assert not let_in(guard, A, 1, 10_000 - WINDOW)
    assert not let_in(guard, A, 1, 1)


def test_a_jump_past_the_window_forgets_what_fell_behind_it() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 1, 10)
    assert let_in(guard, A, 1, 10 + 5 * WINDOW)
    assert not let_in(guard, A, 1, 10)
    assert let_in(guard, A, 1, 10 + 5 * WINDOW - 1)


def test_a_restarted_sender_is_let_in_and_its_earlier_life_is_not() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 4, 1_700_000_000_000_000_000)
    # The new life's counter may even start lower (a clock stepped back): its generation,
    # one more on every start, is what lets it in; it is never locked out by the old window.
    assert let_in(guard, A, 5, 1_600_000_000_000_000_000)
    assert let_in(guard, A, 5, 1_600_000_000_000_000_001)
    assert not let_in(guard, A, 4, 1_700_000_000_000_000_001)  # the old life, replayed
    assert not let_in(guard, A, 5, 1_600_000_000_000_000_000)


def test_senders_have_windows_of_their_own() -> None:
    guard = ReplayGuard()
    assert let_in(guard, A, 1, 50)
    assert let_in(guard, B, 1, 50)
    assert let_in(guard, B, 1, 49)
    assert not let_in(guard, A, 1, 50)


def test_the_table_forgets_the_least_recently_heard_sender_past_its_bound() -> None:
    guard = ReplayGuard(max_senders=2)
    let_in(guard, A, 1, 1)
    let_in(guard, B, 1, 1)
    let_in(guard, A, 1, 2)  # A heard again: B is now the oldest
    let_in(guard, b"c", 1, 1)
    assert len(guard) == 2
    assert not guard.fresh(A, 1, 2)
    assert guard.fresh(B, 1, 1)  # forgotten


def test_nothing_unauthenticated_moves_a_window() -> None:
    guard = ReplayGuard()
    let_in(guard, A, 1, 100)
    assert guard.fresh(A, 1, 5000)  # asked about, never accepted (its tag failed)
    assert let_in(guard, A, 1, 101)
    assert let_in(guard, A, 1, 99)


@given(st.lists(st.integers(0, 5000), max_size=300))
@settings(max_examples=300, deadline=None)
def test_the_window_matches_a_model_that_remembers_everything(seqs: list[int]) -> None:
    """Let in: never seen, and within WINDOW of the highest let in so far."""
    window: Window | None = None
    seen: set[int] = set()
    for seq in seqs:
        top = max(seen, default=None)
        expected = seq not in seen and (top is None or seq > top - WINDOW)
        fresh = True if window is None else window.fresh(seq)
        assert fresh == expected, (seq, top)
        if fresh:
            seen.add(seq)
            if window is None:
                window = Window(1, seq)
            else:
                window.accept(seq)
