"""Every proxy integration test runs on both data planes (see ``plane_kit.py``)."""

from __future__ import annotations

import pytest

from .plane_kit import PLANES


@pytest.fixture(params=PLANES)
def plane(request: pytest.FixtureRequest) -> str:
    return str(request.param)
