"""Every proxy integration test runs on both data planes (see ``planes.py``)."""

from __future__ import annotations

import pytest

from .planes import PLANES


@pytest.fixture(params=PLANES)
def plane(request: pytest.FixtureRequest) -> str:
    return str(request.param)
