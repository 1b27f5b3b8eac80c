"""Tables never cut what a user copies, and times read as times."""

from __future__ import annotations

import pytest

from bodega.cli.session.api import readable_time, table


def test_a_narrow_terminal_still_gets_whole_ids_and_names(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    ids = ["64a8cbfe6a70a1", "b17b486b325009"]
    table(["ID", "NAME", "STATE", "REGION", "IMAGE", "IP", "UPDATED"],
          [(i, f"weathered-forest-{n}-with-a-long-name", "started", "ams", "registry/image:tag",
            "10.213.1.2", "2026-11-23T12:12:53.489248Z") for n, i in enumerate(ids)])
    out = capsys.readouterr().out
    for n, machine_id in enumerate(ids):
        assert machine_id in out
        assert f"weathered-forest-{n}-with-a-long-name" in out
    assert "…" not in out
    assert "2026-11-23T12:12:53.489248Z" in out


def test_event_times_read_as_times() -> None:
    assert readable_time(1795436361143) == "2026-11-23 12:19:21.143Z"
    assert readable_time("2026-11-23T12:12:41Z") == "2026-11-23T12:12:41Z"
    assert readable_time(None) == ""
