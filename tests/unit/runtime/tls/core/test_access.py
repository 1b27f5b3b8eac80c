"""Who may call what on the internal listeners: the one table, checked for what it promises."""

from __future__ import annotations

import pytest

from bodega.runtime.tls.core.access import (
    ADMIN,
    AGENT,
    AGENT_INTERNAL,
    BROKER,
    BROKER_INTERNAL,
    IMAGE_REGISTRY,
    METRICS_STORE,
    POLICY,
    PROXY,
    PROXY_ADMIN,
    REGISTRY,
    WORKER,
    WORKER_API,
    NoRule,
    Route,
    allowed,
    image_registry_allows,
    roles_for,
)

CHANGES = ("POST", "PUT", "PATCH", "DELETE")


PEER_ROUTES = ("/import", "/import-volume", "/migrate-in", "/switch")  # worker to worker


def routes(listener: str) -> list[Route]:
    return [r for r in POLICY if r.listener == listener]


def test_a_worker_may_call_no_other_workers_machine_routes() -> None:
    machine_routes = [r for r in routes(WORKER_API) if r.path.startswith("/v1/machines")]
    assert len(machine_routes) > 25
    # Only a move's target is handed a machine, its volume's data and a live move's VM
    # state, by another worker.
    assert sorted(str(r) for r in machine_routes if WORKER in POLICY[r]) == [
        "POST /v1/machines/{id}/import", "POST /v1/machines/{id}/import-volume",
        "POST /v1/machines/{id}/migrate-in", "POST /v1/machines/{id}/switch"]
    assert not allowed(WORKER_API, "POST", "/v1/machines/{id}/import", BROKER)
    # Beside health and those, a worker calls only the job routes of another (a task's runner
    # at its job's home: docs/jobs.md) and the one that carries a snapshot's data
    # (docs/volumes.md).
    others = [str(r) for r in routes(WORKER_API) if WORKER in POLICY[r]
              and not r.path.startswith(("/v1/jobs", "/v1/job-", "/v1/machines"))]
    assert sorted(others) == ["GET /v1/health", "GET /v1/snapshots/{id}/data",
                              "PUT /v1/snapshots/{id}/data"]


def test_a_proxy_wakes_and_idles_machines_serves_their_statics_and_nothing_more() -> None:
    mine = {str(r) for r in routes(WORKER_API) if PROXY in POLICY[r]}
    assert mine == {"GET /v1/health", "GET /v1/machines", "GET /v1/machines/{id}",
                    "POST /v1/machines/{id}/start", "POST /v1/machines/{id}/stop",
                    "POST /v1/machines/{id}/suspend", "GET /v1/machines/{id}/wait",
                    "GET /v1/machines/{id}/statics/{path:path}"}
    assert not allowed(WORKER_API, "POST", "/v1/machines", PROXY)
    assert not allowed(WORKER_API, "DELETE", "/v1/machines/{id}", PROXY)
    assert not allowed(WORKER_API, "POST", "/v1/machines/{id}/exec", PROXY)


def test_the_broker_may_call_every_machine_and_volume_route_of_a_worker() -> None:
    for route in routes(WORKER_API):
        if route.path.startswith(("/v1/machines", "/v1/volumes", "/v1/reservations")) \
                and not route.path.endswith(PEER_ROUTES):  # worker to worker
            assert BROKER in POLICY[route], route


def test_the_operator_reads_and_scrapes_and_changes_nothing() -> None:
    changes = [str(r) for r in POLICY if ADMIN in POLICY[r] and r.method in CHANGES
               and r.listener != REGISTRY and r.path != "/v1/cluster/certificates"]
    assert changes == []
    for listener in (WORKER_API, PROXY_ADMIN, AGENT_INTERNAL):
        assert roles_for(listener, "GET", "/metrics") == {ADMIN, METRICS_STORE}
        assert roles_for(listener, "GET", "/v1/health") == {WORKER, BROKER, PROXY, AGENT, ADMIN}
    assert roles_for(PROXY_ADMIN, "GET", "/v1/routes") == {ADMIN}


def test_members_replicate_the_view_among_themselves() -> None:
    for path in ("/v1/registry/sync", "/v1/registry/digest"):
        assert roles_for(REGISTRY, "POST", path) == {WORKER, BROKER, PROXY, AGENT}
    assert ADMIN in roles_for(REGISTRY, "POST", "/v1/registry/subscriptions")
    assert roles_for(BROKER_INTERNAL, "POST", "/v1/cluster/certificates") == {
        WORKER, BROKER, PROXY, AGENT, ADMIN}


def test_a_route_without_a_rule_has_none_and_is_allowed_to_no_one() -> None:
    with pytest.raises(NoRule, match="GET /v1/secrets"):
        roles_for(WORKER_API, "GET", "/v1/secrets")
    assert not allowed(WORKER_API, "GET", "/v1/secrets", ADMIN)
    assert not allowed(WORKER_API, "PUT", "/v1/health", BROKER)  # the method counts too
    assert not allowed(PROXY_ADMIN, "POST", "/v1/machines", BROKER)  # and the listener
    assert allowed(WORKER_API, "GET", "/v1/health", PROXY)


def test_every_rule_names_known_roles_and_at_least_one() -> None:
    for route, roles in POLICY.items():
        assert roles, route
        assert roles <= {WORKER, BROKER, PROXY, AGENT, ADMIN, METRICS_STORE}, route


def test_the_metrics_store_scrapes_and_discovers_and_calls_nothing_else() -> None:
    mine = sorted(str(r) for r in POLICY if METRICS_STORE in POLICY[r])
    assert mine == ["GET /metrics", "GET /metrics", "GET /metrics", "GET /v1/metrics/targets"]
    assert roles_for(BROKER_INTERNAL, "GET", "/v1/metrics/targets") == {METRICS_STORE, ADMIN}
    assert not allowed(WORKER_API, "GET", "/v1/machines", METRICS_STORE)
    # A query one broker hands another carries the org's filter: brokers alone send one.
    assert roles_for(BROKER_INTERNAL, "POST", "/v1/metrics/query") == {BROKER}


def test_the_image_registry_lets_admin_tokens_push_and_workers_pull_nothing_more() -> None:
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        assert image_registry_allows(method, None, admin=True)  # the admin token: anything
        assert image_registry_allows(method, WORKER, admin=True)
        assert not image_registry_allows(method, None, admin=False)  # no credential: nothing
        for role in (BROKER, PROXY, AGENT, ADMIN, IMAGE_REGISTRY):  # nor any other certificate
            assert not image_registry_allows(method, role, admin=False)
    assert image_registry_allows("GET", WORKER, admin=False)
    assert image_registry_allows("HEAD", WORKER, admin=False)
    for method in ("POST", "PUT", "PATCH", "DELETE"):  # a worker's certificate never writes
        assert not image_registry_allows(method, WORKER, admin=False)


def test_the_image_registry_role_may_call_no_internal_route() -> None:
    assert [str(r) for r in POLICY if IMAGE_REGISTRY in POLICY[r]] == []
