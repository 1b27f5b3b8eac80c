"""The bounds of a query, and what a query cut at one is told."""

from __future__ import annotations

import pytest

from bodega.registry.api.core.limits import Bound, QueryLimits, cut


def test_defaults_and_refused_limits() -> None:
    limits = QueryLimits()
    assert (limits.time, limits.rows, limits.bytes) == (5.0, 10_000, 8 * 1024 * 1024)
    with pytest.raises(ValueError, match="query limit time"):
        QueryLimits(time=0)
    with pytest.raises(ValueError, match="query limit rows"):
        QueryLimits(rows=-1)
    with pytest.raises(ValueError, match="query limit bytes"):
        QueryLimits(bytes=0)
    with pytest.raises(ValueError, match="query limits idle and settle"):
        QueryLimits(idle=-1.0)


def test_a_cut_names_its_bound_and_how_to_ask_for_less() -> None:
    limits = QueryLimits()
    assert cut(Bound.TIME, limits).startswith("query cut at the time limit (5 s of work): ")
    assert cut(Bound.ROWS, limits).startswith("query cut at the row limit (10000 rows): ")
    assert "LIMIT" in cut(Bound.ROWS, limits)
    assert cut(Bound.BYTES, limits).startswith("query cut at the size limit (8 MiB of rows)")
    assert "json_extract" in cut(Bound.BYTES, limits)
    assert "(512 bytes of rows)" in cut(Bound.BYTES, QueryLimits(bytes=512))
