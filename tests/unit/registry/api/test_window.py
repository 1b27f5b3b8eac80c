"""Resuming a subscription from the change a client saw: replay, gone, or never made."""

from __future__ import annotations

from bodega.registry.api.core.window import Kept, Resume, refusal, resume


def test_the_window_keeps_the_last_changes_only() -> None:
    kept = Kept(0, 0).after(3, keep=5)
    assert kept == Kept(0, 3)
    kept = kept.after(4, keep=5)
    assert kept == Kept(2, 7)
    assert kept.after(0, keep=5) == kept


def test_a_client_resumes_while_the_next_change_is_kept() -> None:
    kept = Kept(trimmed=2, last=7)
    assert resume(7, kept) is Resume.REPLAY  # nothing to replay: live changes follow
    assert resume(2, kept) is Resume.REPLAY  # change 3 is the first kept
    assert resume(1, kept) is Resume.GONE
    assert resume(8, kept) is Resume.AHEAD
    assert resume(0, Kept(0, 0)) is Resume.REPLAY
    assert refusal(1, kept) == ("change 2 is no longer kept (the log starts after change 2): "
                                "subscribe again for the whole result")
    assert "beyond this subscription's last change (7)" in refusal(8, kept)
