"""Nothing a client sends makes the broker answer 500 or anything but the error shape."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .broker_kit import ADMIN
from .fuzz_kit import TALLY, error_problem, served_cluster

EXAMPLES = int(os.environ.get("BODEGA_FUZZ_EXAMPLES", "2"))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                max_size=4),
    max_leaves=12,
)
config_keys = st.sampled_from(["image", "guest", "env", "services", "init", "restart",
                               "mounts", "standbys", "metadata", "stop_config", "checks",
                               "auto_destroy", "size", "processes"])
configs = st.dictionaries(config_keys, json_values, max_size=6)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"config": configs}, optional={
        "region": json_values, "name": json_values, "skip_launch": json_values,
        "lease_ttl": json_values}),
)
paths = st.sampled_from([
    "/v1/apps/fuzz/machines", "/v1/apps/fuzz/machines/{id}", "/v1/apps/fuzz/machines/{id}/stop",
    "/v1/apps/fuzz/machines/{id}/signal", "/v1/apps/fuzz/machines/{id}/exec",
    "/v1/apps/fuzz/machines/{id}/lease", "/v1/apps/fuzz/machines/{id}/metadata",
    "/v1/apps/fuzz/volumes", "/v1/platform/placements", "/v1/apps",
    "/v1/apps/fuzz/ip_assignments", "/v1/orgs/personal/machines",
])


@pytest.fixture(scope="module")
def broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A broker and a worker on their own event loop in a thread, for synchronous fuzzing."""
    with served_cluster(tmp_path_factory.mktemp("fuzz")) as (target, _c, _loop):
        yield target.url, target.machine_id


@settings(max_examples=max(300, EXAMPLES * 20), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(path=paths, method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE", "GET"]),
       body=bodies, raw=st.booleans())
def test_arbitrary_requests_never_get_a_500(broker_url: tuple[str, str], path: str,
                                            method: str, body: Any, raw: bool) -> None:
    url, mid = broker_url
    TALLY.cases += 1
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"},
                      timeout=30) as http:
        content = (str(body).encode() if raw else None)
        response = http.request(method, path.format(id=mid), content=content,
                                json=None if raw else body)
    problem = error_problem(response.status_code, response.headers.get("content-type", ""),
                            response.content)
    TALLY.failures += problem is not None
    assert problem is None, problem
