"""The generation counter and peer list survive restarts; a damaged file is not fatal."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.registry.membership.statefile import SavedState, StateFile


def test_state_round_trips(tmp_path: Path) -> None:
    state = StateFile(tmp_path / "node" / "membership.json")
    assert state.load() == SavedState()
    state.save(SavedState(3, {"b": ("10.0.0.2", 7946), "c": ("10.0.0.3", 7946)}))
    assert state.load() == SavedState(3, {"b": ("10.0.0.2", 7946), "c": ("10.0.0.3", 7946)})
    assert not list((tmp_path / "node").glob("*.tmp"))  # replaced atomically


@pytest.mark.parametrize("text", ["", "{", "[]", '{"peers": {}}', '{"generation": "x"}',
                                  '{"generation": 2, "peers": {"b": 1}}'])
def test_an_unreadable_file_counts_as_no_state(tmp_path: Path, text: str) -> None:
    path = tmp_path / "membership.json"
    path.write_text(text)
    assert StateFile(path).load() == SavedState()
