"""No open doors: every socket of every component of a real `bodega up` refuses strangers.

The sockets come from /proc (each component's fds joined with its kernel
socket tables), not from a list of ports, and each is asked what it is: one
nobody can account for fails the test. The public API gets requests without
and with wrong tokens on its routes (401, then 429 once an address keeps
failing). Every internal listener (mutual TLS) is knocked on with no
certificate, another CA's, an expired one and plain HTTP (each refused in
the handshake, and counted), and with each real component's certificate on
every route its role may not call (403, counted). Every gossip socket gets
packets sealed with another cluster's key, unsealed, or with a forged tag,
and a real packet captured from the wire and sent again (each dropped,
counted, and nothing changes). The registry agent's Unix socket, for the
host's own processes, is root's alone. The data dir, the logs and every
process's command line and every machine's environment are searched for a
secret (the gossip keys included) or a private key.

One module for one idea, every door of one running cluster, and it is long for that:
the inventory (every listener accounted for) and the knocks on each kind of door share
one `bodega up` and one list of its doors, which a module per door kind would start
again each, and the inventory is what says that no door went unknocked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.cluster import host_network
from bodega.registry.membership.core.members import MemberRecord, Role, Status
from bodega.registry.membership.core.messages import Message, Ping, Sync, encode
from bodega.registry.sealing.core.envelope import SealedEnvelope
from bodega.registry.sealing.core.keyring import GossipKey, Keyring
from bodega.runtime.tls.contexts import client_context
from bodega.runtime.tls.core import access
from tests.cluster.door_kit import (
    ARGV_ECHO,
    Cluster,
    Door,
    classify,
    gossip_drops,
    hostile_arguments,
    memory_holds,
    until,
    up_cluster_with_apps,
)
from tests.cluster.listener_kit import children_of, listeners_of, unix_listeners_of
from tests.keyring_kit import other_keyring
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bodega up with machines needs root")

PUBLIC = {"/v1/health", "/openapi.json", "/v1/openapi.json", "/docs"}
ADMIN_ONLY = [("POST", "/v1/apps"), ("GET", "/metrics"), ("GET", "/v1/cluster/members"),
              ("GET", "/v1/cluster/workers"), ("GET", "/v1/cluster/keys"),
              ("POST", "/v1/cluster/keys/rotate"), ("GET", "/v1/cluster/hosts"),
              ("GET", "/v1/cluster/machines"), ("POST", "/v1/cluster/hosts/ams-1/drain"),
              ("POST", "/v1/cluster/hosts/ams-1/undrain")]
REGISTRY = [("POST", "/v1/registry/sync"), ("POST", "/v1/registry/digest"),
            ("POST", "/v1/registry/subscriptions")]
WORKER = [("GET", "/v1/info"), ("GET", "/v1/capacity"), ("GET", "/v1/log"), ("GET", "/metrics"),
          ("GET", "/v1/machines"), ("POST", "/v1/machines"), ("GET", "/v1/machines/{id}"),
          ("DELETE", "/v1/machines/{id}"), ("POST", "/v1/machines/{id}/stop"),
          ("POST", "/v1/machines/{id}/exec"), ("GET", "/v1/machines/{id}/events"),
          ("POST", "/v1/reservations"), ("POST", "/v1/cordon"), ("GET", "/v1/volumes")]
PROXY_ADMIN = [("GET", "/metrics"), ("GET", "/v1/routes")]
AGENT_INTERNAL = [("GET", "/metrics")]
BROKER_INTERNAL = [("POST", "/v1/cluster/certificates")]
# Each internal listener: its name in the access table, and the routes knocked on there.
# The registry's routes are the host's agent's alone: the other components read its view.
INTERNAL = {"worker-api": (access.WORKER_API, WORKER),
            "proxy-admin": (access.PROXY_ADMIN, PROXY_ADMIN),
            "broker-internal": (access.BROKER_INTERNAL, BROKER_INTERNAL),
            "agent-internal": (access.AGENT_INTERNAL, AGENT_INTERNAL + REGISTRY)}
SERVES_REGISTRY = {"agent-internal"}
# Components whose serving program is their child (and which are no members of the cluster).
SUPERVISES = {"registry", "metrics-store"}
# The metrics store's pages: every one but /health (which says "OK") needs its password.
METRICS_STORE = ["/api/v1/query?query=up", "/api/v1/series?match[]=up", "/api/v1/labels",
                 "/api/v1/export?match[]=up", "/api/v1/write", "/api/v1/import",
                 "/api/v1/admin/tsdb/delete_series?match[]=up", "/targets", "/config",
                 "/metrics", "/flags", "/debug/pprof/", "/vmui/", "/snapshot/create"]
HANDSHAKE_REFUSALS = {"no certificate": "no certificate", "another CA's": "unknown authority",
                      "an expired one": "expired"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with up_cluster_with_apps(tmp_path_factory.mktemp("doors")) as running:
        yield running


@pytest.fixture(scope="module")
def doors(cluster: Cluster) -> list[Door]:
    with cluster.admin() as api:
        members = api.get("/v1/cluster/members").json()
    operator = cluster.operator()
    return [Door(str(c["name"]), str(c["role"]), pid, listener,
                 classify(c, listener, members, operator))
            for c in cluster.components() for pid in serving_pids(c)
            for listener in listeners_of(pid)]


def serving_pids(component: dict[str, Any]) -> list[int]:
    """The component's process; the image registry's is a supervisor of docker-registry,
    the metrics store's of victoria-metrics."""
    pid = int(component["pid"])
    return [pid, *children_of(pid)] if component["role"] in SUPERVISES else [pid]


def of_kind(doors: list[Door], kind: str) -> list[Door]:
    found = [d for d in doors if d.kind == kind]
    assert found, f"no {kind} listener found among {[str(d) for d in doors]}"
    return found


def wrong_credentials(cluster: Cluster) -> dict[str, dict[str, str]]:
    """Headers that must not open a door: none, malformed, and keys to other doors."""
    return {
        "no header": {},
        "bearer without a token": {"authorization": "Bearer"},
        "basic auth": {"authorization": "Basic YWRtaW46YWRtaW4="},
        "unknown scheme": {"authorization": f"Token {cluster.token}"},
        "garbage": {"authorization": "Bearer a b c"},
        "wrong token": {"authorization": "Bearer not-a-token"},
        "admin token with a suffix": {"authorization": f"Bearer {cluster.token}x"},
        "the secrets key": {"authorization": f"Bearer {cluster.key('secrets-key')}"},
        "a gossip key": {"authorization": f"Bearer {cluster.keyring.keys[0].encoded()}"},
    }


def knock(http: httpx.Client, base: str, method: str, path: str,
          headers: dict[str, str]) -> httpx.Response:
    body: Any = {"table": "machines"} if path.endswith("subscriptions") else {}
    http.cookies.clear()  # each knock stands alone: nothing an earlier answer set goes back
    return http.request(method, base + path, headers=headers, json=body)


def refusals(base: str, routes: list[tuple[str, str]], credentials: dict[str, dict[str, str]],
             expect: int | set[int], verify: ssl.SSLContext | bool = True) -> list[str]:
    """Every (route, credential) that was not refused with ``expect`` and the error shape."""
    wrong = []
    # One client for them all: a client per request costs more than the request (hundreds).
    with httpx.Client(timeout=30, verify=verify) as http:
        for method, path in routes:
            for label, headers in credentials.items():
                wrong += refused_with(knock(http, base, method, path, headers), expect,
                                      f"{method} {base}{path} with {label}")
    return wrong


def refused_with(answer: httpx.Response, expect: int | set[int], what: str) -> list[str]:
    """[] when ``answer`` is ``expect`` in the API's error shape, else what was wrong."""
    shaped = answer.headers.get("content-type", "").startswith("application/json") and \
        set(answer.json()) >= {"error", "status"}
    if answer.status_code not in ({expect} if isinstance(expect, int) else expect) or not shaped:
        return [f"{what}: {answer.status_code} {answer.text[:120]}"]
    return []


def api_routes(base: str, app: str, machine: str) -> list[tuple[str, str]]:
    """Every operation the broker documents, with its path filled in, plus bodega's own."""
    doc = httpx.get(f"{base}/openapi.json", timeout=30).json()
    routes = []
    for path, operations in doc["paths"].items():
        filled = re.sub(r"\{[^}]+\}", lambda m: {"{app_name}": app, "{machine_id}": machine}.get(
            m.group(0), "x"), path)
        routes += [(method.upper(), filled) for method in operations if filled not in PUBLIC]
    return [*routes, ("GET", "/metrics"), ("GET", "/v1/cluster/keys"),
            ("POST", "/v1/cluster/keys/rotate")]


def test_the_metrics_store_answers_nothing_without_its_password(doors: list[Door]) -> None:
    if shutil.which("victoria-metrics") is None:
        pytest.skip("victoria-metrics is not installed: no store runs")
    for door in of_kind(doors, "metrics-store"):
        assert door.listener.host == "127.0.0.1", door  # loopback only
        for path in METRICS_STORE:
            for auth in (None, ("bodega", "wrong"), ("admin", "admin")):
                answer = httpx.get(f"{door.url}{path}", auth=auth, timeout=30)
                assert answer.status_code == 401, (str(door), path, auth, answer.status_code)
        assert httpx.get(f"{door.url}/health", timeout=30).text.strip() == "OK"


def test_every_listener_is_accounted_for(doors: list[Door], cluster: Cluster) -> None:
    unknown = [str(d) for d in doors if d.kind == "unknown"]
    assert unknown == [], f"listeners nobody accounts for: {unknown}"
    for component in cluster.components():
        kinds = sorted(d.kind for d in doors if d.component == component["name"])
        # A worker also answers DNS for machines when the private network runs (on by
        # default where it can): to this host, a stranger to every network, it says REFUSED.
        resolver = ["resolver"] if host_network.unable("auto") is None else []
        # The host's agent alone gossips: the others are its tenants, with no gossip socket.
        expected = {"broker": ["broker-api", "broker-internal"],
                    "worker": sorted(["jobs-door", "worker-api", *resolver]),
                    "proxy": ["proxy-admin", "proxy-public"],
                    "agent": ["agent-internal", "gossip"],
                    "registry": ["image-registry"],
                    "metrics-store": ["metrics-store"]}[component["role"]]
        assert kinds == expected, f"{component['name']} listens on {kinds}"
    # docker-registry itself listens on a Unix socket of its own, root's alone: the front
    # (test_the_image_registry_lets_only_the_admin_token_push) is the registry's one door.
    registry = next(c for c in cluster.components() if c["role"] == "registry")
    sockets = [path for pid in children_of(int(registry["pid"]))
               for path in unix_listeners_of(pid)]
    assert sockets, "docker-registry listens on no Unix socket of its own"
    for path in sockets:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0 or \
            stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0, path
        assert path.stat().st_uid == 0


def test_the_image_registry_lets_only_the_admin_token_push(
        doors: list[Door], cluster: Cluster) -> None:
    """Over TLS only; with no credential or a wrong one (another door's key, an app's token)
    401 (429 once the address keeps failing); a worker's certificate pulls and never pushes;
    every other role's certificate opens nothing; the admin token pushes."""
    basic = {label: {"authorization": "Basic " + base64.b64encode(
        f"bodega:{secret}".encode()).decode()} for label, secret in (
            ("a wrong token", "not-a-token"), ("the app's token", cluster.app_token),
            ("the secrets key", cluster.key("secrets-key")),
            ("a gossip key", cluster.keyring.keys[0].encoded()))}
    push = "/v2/intruder/blobs/uploads/"
    workers = sorted(c["name"] for c in cluster.components() if c["role"] == "worker")
    for door in of_kind(doors, "image-registry"):
        base = door.listener.url("https")
        with pytest.raises(httpx.TransportError):  # plain HTTP to a TLS port
            httpx.get(f"{door.listener.url()}/v2/", timeout=30)
        anonymous = client_context(cluster.ca_pem)
        with httpx.Client(verify=anonymous, timeout=30) as https:
            for method, path in (("GET", "/v2/"), ("GET", "/v2/_catalog"), ("POST", push)):
                bare = https.request(method, base + path)
                assert bare.status_code == 401, bare.text
                assert bare.headers["www-authenticate"].startswith("Basic ")
                for label, headers in basic.items():
                    wrong = https.request(method, base + path, headers=headers)
                    assert wrong.status_code in (401, 429), f"{label}: {wrong.text}"
        with httpx.Client(verify=cluster.as_role("worker", workers[0]), timeout=30) as https:
            assert https.get(base + "/v2/").status_code == 200
            assert https.post(base + push).status_code == 403
        for role in ("proxy", "broker", "agent", "admin"):
            with httpx.Client(verify=cluster.as_role(role), timeout=30) as https:
                assert https.get(base + "/v2/").status_code == 403, role
                assert https.post(base + push).status_code == 403, role
        with httpx.Client(verify=anonymous, timeout=30) as https:
            catalog = https.get(base + "/v2/_catalog", auth=("bodega", cluster.token))
            assert catalog.json() == {"repositories": []}  # nothing got in
            started = https.post(base + push, auth=("bodega", cluster.token))
            assert started.status_code == 202, started.text


def test_a_jobs_door_takes_a_pass_of_its_app_and_nothing_else(
        doors: list[Door], cluster: Cluster) -> None:
    """Plain HTTP, one route: a submit with no credential, any token or key of another
    door, or a pass altered, is 401; a pass (from a broker, for the app token's app) is
    refused for another app (403) and opens no other route (404, in the error shape)."""
    broker = of_kind(doors, "broker-api")[0].listener.url()
    granted = httpx.post(f"{broker}/sched/pass", timeout=30,
                         headers={"authorization": f"Bearer {cluster.app_token}"}).json()
    assert granted["app"] == "alpha"
    app, expiry, tag = granted["token"].removeprefix("bdj_").split(".")
    forged = {f"bdj_beta.{expiry}.{tag}", f"bdj_{app}.{int(expiry) + 3600}.{tag}",
              f"bdj_{app}.{expiry}.{tag[::-1]}", f"bdj_{app}.{int(time.time()) - 1}.{tag}"}
    credentials = {**wrong_credentials(cluster),
                   "the admin token": {"authorization": f"Bearer {cluster.token}"},
                   "an app token": {"authorization": f"Bearer {cluster.app_token}"},
                   **{f"a pass altered ({raw})": {"authorization": f"Bearer {raw}"}
                      for raw in forged}}
    job = {"name": "intruder", "command": "true"}
    for door in of_kind(doors, "jobs-door"):
        base = door.listener.url()
        for label, headers in credentials.items():
            answer = httpx.post(f"{base}/sched/submit", json=job, headers=headers, timeout=30)
            assert (answer.status_code, answer.json()["status"]) == (401, "unauthenticated"), \
                f"{door} {label}: {answer.text}"
        mine = {"authorization": f"Bearer {granted['token']}"}
        other = httpx.post(f"{base}/sched/submit", json={**job, "app": "beta"}, headers=mine,
                           timeout=30)
        assert other.status_code == 403, other.text
        for method, path in (("GET", "/v1/health"), ("GET", "/v1/apps/alpha/machines"),
                             ("GET", "/sched/status/intruder"), ("GET", "/sched/submit")):
            answer = httpx.request(method, base + path, headers=mine, timeout=30)
            assert answer.status_code in (404, 405), f"{door} {method} {path}: {answer.text}"
            assert set(answer.json()) == {"error", "status"}


def test_public_api_refuses_missing_and_wrong_tokens(doors: list[Door], cluster: Cluster) -> None:
    for door in of_kind(doors, "broker-api"):
        base = door.listener.url()
        routes = api_routes(base, "alpha", cluster.alpha_machine)
        assert len(routes) > 40, routes
        credentials = wrong_credentials(cluster)
        # Hundreds of failures from one address: 401, then 429 once it has failed too often.
        assert refusals(base, routes, credentials, {401, 429}) == []
        limited = httpx.get(f"{base}/v1/apps", timeout=30, headers={"authorization": "Bearer x"})
        assert limited.status_code == 429, limited.text
        assert limited.json()["status"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        with cluster.admin() as api:  # a good token from the same address still gets in
            assert api.get("/v1/apps").status_code == 200
        for path in PUBLIC:  # open by design, and say nothing about what runs
            answer = httpx.get(base + path, timeout=30)
            assert answer.status_code == 200
            for needle in ("alpha", cluster.alpha_machine, cluster.token):
                assert needle not in answer.text, f"{path} shows {needle}"


def test_an_app_token_stays_inside_its_app(doors: list[Door], cluster: Cluster) -> None:
    token = {"authorization": f"Bearer {cluster.app_token}"}
    for door in of_kind(doors, "broker-api"):
        base = door.listener.url()
        theirs = [r for r in api_routes(base, "beta", cluster.beta_machine) if "/beta" in r[1]]
        assert len(theirs) > 30, theirs
        # Another app's things are "not found", as if they did not exist.
        assert refusals(base, theirs, {"app token": token}, 404) == []
        assert refusals(base, ADMIN_ONLY, {"app token": token}, 403) == []
        placements = httpx.post(f"{base}/v1/platform/placements", headers=token, timeout=30,
                                json={"region": "ams", "app": "beta"})
        assert placements.status_code == 404, placements.text
        mine = httpx.get(f"{base}/v1/apps/alpha/machines", headers=token, timeout=30)
        assert [m["id"] for m in mine.json()] == [cluster.alpha_machine]
        listed = httpx.get(f"{base}/v1/apps", headers=token, timeout=30).json()
        assert [a["name"] for a in listed["apps"]] == ["alpha"]
        org = httpx.get(f"{base}/v1/orgs/personal/machines", headers=token, timeout=30)
        assert org.status_code == 200, org.text
        assert cluster.alpha_machine in org.text
        assert cluster.beta_machine not in org.text
    with cluster.admin() as api:  # the refused deletes and stops changed nothing
        beta = api.get(f"/v1/apps/beta/machines/{cluster.beta_machine}").json()
        assert beta["state"] == "started"


def internal_refusals(door: Door, cluster: Cluster, doors: list[Door]) -> dict[str, float]:
    """The component's count of internal calls it refused, by reason, from its metrics."""
    text = metrics_of(door, cluster, doors)
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^bodega_internal_refused_total\{reason="([^"]+)"\} (\S+)$', text, re.MULTILINE)}


def grown(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k, 0.0)}


def test_internal_listeners_refuse_strangers_in_the_handshake_and_count_them(
        doors: list[Door], cluster: Cluster, tmp_path: Path) -> None:
    knocks = cluster.knocks(tmp_path)
    tokens = {"authorization": f"Bearer {cluster.token}"}  # a key to another door: no help
    for kind, (_listener, routes) in INTERNAL.items():
        for door in of_kind(doors, kind):
            before = internal_refusals(door, cluster, doors)
            tried = [("GET", "/v1/health"), *routes[:2]]
            for method, path in tried:
                for context in knocks.values():
                    with httpx.Client(verify=context, timeout=30) as http, \
                            pytest.raises(httpx.TransportError):
                        http.request(method, door.url + path, headers=tokens, json={})
                with pytest.raises(httpx.TransportError):  # plain HTTP to a TLS port
                    httpx.request(method, door.listener.url() + path, json={}, timeout=30)
            assert grown(before, internal_refusals(door, cluster, doors)) == {
                **{reason: len(tried) for reason in HANDSHAKE_REFUSALS.values()},
                "not tls": len(tried)}, f"{door} counted its refusals wrong"
            # Health answers the cluster's own, with nothing but who is answering.
            health = httpx.get(f"{door.url}/v1/health", timeout=30,
                               verify=cluster.operator()).json()
            assert set(health) <= {"ok", "ready", "name", "region"}, health


def identities(cluster: Cluster, door: Door) -> dict[str, ssl.SSLContext]:
    """A real certificate of each role: of another worker than the door's, of the proxy, of
    the broker, of the host's registry agent, and the operator's."""
    workers = sorted(c["name"] for c in cluster.components() if c["role"] == "worker")
    other = next(name for name in workers if name != door.component)
    return {"worker": cluster.as_role("worker", other), "proxy": cluster.as_role("proxy"),
            "broker": cluster.as_role("broker"), "agent": cluster.as_role("agent"),
            "admin": cluster.operator()}


def test_each_role_gets_403_on_every_route_its_rule_does_not_allow(
        doors: list[Door], cluster: Cluster) -> None:
    """Every route in the access table of the listener (and the registry's, where it is
    served), with a real certificate of each role: 403 wherever the rule leaves the role
    out."""
    refused = 0
    for kind, (listener, _knocked) in INTERNAL.items():
        served = (listener, access.REGISTRY) if kind in SERVES_REGISTRY else (listener,)
        routes = [(r.method, r.path) for r in access.POLICY if r.listener in served]
        for door in of_kind(doors, kind):
            before = internal_refusals(door, cluster, doors)
            forbidden = 0
            for role, context in identities(cluster, door).items():
                wrong = [(m, p) for m, p in routes if not access.allowed(
                    access.REGISTRY if p.startswith("/v1/registry/") else listener, m, p, role)]
                filled = [(m, p.replace("{id}", cluster.alpha_machine).replace("{key}", "k"))
                          for m, p in wrong]
                assert refusals(door.url, filled, {role: {}}, 403, verify=context) == []
                forbidden += len(wrong)
            # The broker's internal listener holds health and renewal, open to every role.
            assert forbidden > 0 or kind == "broker-internal"
            assert grown(before, internal_refusals(door, cluster, doors)) == (
                {"role": forbidden} if forbidden else {})
            refused += forbidden
            if kind not in SERVES_REGISTRY:  # no replica here: not even a member gets rows
                assert refusals(door.url, REGISTRY, {"broker": {}}, 404,
                                verify=cluster.as_role("broker")) == []
    assert refused > 100  # every worker's machine routes, for workers, proxies, the operator
    with cluster.admin() as api:  # and none of it changed anything
        beta = api.get(f"/v1/apps/beta/machines/{cluster.beta_machine}").json()
        alpha = api.get(f"/v1/apps/alpha/machines/{cluster.alpha_machine}").json()
        assert (alpha["state"], beta["state"]) == ("started", "started")
        assert all(not w.get("cordoned") for w in api.get("/v1/cluster/workers").json())


def test_the_agents_unix_socket_is_roots_alone(doors: list[Door], cluster: Cluster) -> None:
    """The host's processes hand the agent their rows on a Unix socket that takes no
    credentials: only root may reach it (a 0700 directory, a 0600 socket, both root's)."""
    agent = next(c for c in cluster.components() if c["role"] == "agent")
    sockets = unix_listeners_of(int(agent["pid"]))
    assert [p.name for p in sockets] == ["local.sock"], sockets
    path = sockets[0]
    assert path.parent == cluster.data / "agent"
    for what, mode in ((path.parent, 0o700), (path, 0o600)):
        found = what.stat()
        assert (stat.S_IMODE(found.st_mode), found.st_uid) == (mode, 0), f"{what}: {found}"
    # And an unprivileged user is refused, as a machine's user would be.
    connect = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
               "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    print('refused')")
    tried = subprocess.run([machine_python(), "-c", connect, str(path)], user="nobody",
                           capture_output=True, text=True, timeout=60, cwd="/")
    assert tried.stdout.strip() == "refused", tried


def test_the_proxy_serves_apps_and_nothing_else(doors: list[Door], cluster: Cluster) -> None:
    for door in of_kind(doors, "proxy-public"):
        for path in ("/", "/v1/health", "/metrics", "/v1/routes", "/v1/registry/sync"):
            for host in ("nowhere.localhost", door.listener.reachable_host(), "localhost"):
                answer = httpx.get(door.listener.url() + path, headers={"host": host},
                                   timeout=30)
                assert answer.status_code == 404, (path, host, answer.text)
                assert cluster.alpha_machine not in answer.text
                assert "alpha" not in answer.text


def metrics_of(door: Door, cluster: Cluster, doors: list[Door]) -> str:
    """The metrics of the door's component: the broker's on its public API (the admin
    token), a worker's, a proxy's or the agent's on its internal listener (the operator's
    certificate)."""
    kind = {"broker": "broker-api", "worker": "worker-api", "proxy": "proxy-admin",
            "agent": "agent-internal"}[door.role]
    http = next(d for d in doors if d.component == door.component and d.kind == kind)
    if door.role == "broker":
        answer = httpx.get(f"{http.url}/metrics", timeout=30,
                           headers={"authorization": f"Bearer {cluster.token}"})
    else:
        answer = httpx.get(f"{http.url}/metrics", timeout=30, verify=cluster.operator())
    assert answer.status_code == 200, answer.text
    return answer.text


def scrape(door: Door, cluster: Cluster, doors: list[Door],
           reasons: tuple[str, ...] = ("auth", "unknown_key")) -> float | None:
    """This component's count of gossip packets dropped for ``reasons``, from its metrics."""
    text = metrics_of(door, cluster, doors)
    counts = [gossip_drops(text, reason) for reason in reasons]
    return None if None in counts else sum(c or 0.0 for c in counts)


def members_unchanged(cluster: Cluster) -> None:
    time.sleep(1.0)  # time enough for a believed claim to spread
    with cluster.admin() as api:
        members = api.get("/v1/cluster/members").json()
    assert "intruder" not in {m["name"] for m in members}
    assert {m["name"]: m["status"] for m in members} == {
        str(c["name"]): "alive" for c in cluster.components() if c["role"] not in SUPERVISES}


def test_gossip_sealed_with_another_key_is_dropped_and_counted(
        doors: list[Door], cluster: Cluster) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as intruder:
        intruder.bind(("127.0.0.1", 0))
        intruder.settimeout(1.0)
        me = intruder.getsockname()
        for door in of_kind(doors, "gossip"):
            before = scrape(door, cluster, doors)
            assert before is not None, f"{door.component} does not count bad gossip packets"
            # Were it believed: a new member joins and the receiver is declared dead.
            claim = Message(sender="intruder", body=Sync(records=(MemberRecord(
                "intruder", me, Role.WORKER, "ams", {"url": "http://127.0.0.1:9"}),), reply=True),
                updates=(MemberRecord(door.component, (door.listener.reachable_host(),
                                                       door.listener.port), Role(door.role),
                                      "ams", incarnation=99, status=Status.DEAD, by="intruder"),))
            target = (door.listener.reachable_host(), door.listener.port)
            theirs = SealedEnvelope(other_keyring("another cluster"), "intruder",
                                    first_seq=time.time_ns(), salts=os.urandom)
            intruder.sendto(theirs.seal(encode(claim), 1), target)  # another cluster's key
            intruder.sendto(encode(claim), target)  # not sealed at all
            # The cluster's key id on a packet sealed with another key: a forged tag.
            guess = GossipKey(os.urandom(32))
            forged = bytearray(SealedEnvelope(Keyring.of(guess), "intruder", first_seq=1,
                                              salts=os.urandom).seal(encode(claim), 1))
            forged[1:5] = cluster.keyring.primary_key.raw_id
            intruder.sendto(bytes(forged), target)

            def counted(d: Door = door, b: float = before) -> bool:
                return (scrape(d, cluster, doors) or 0) >= b + 3

            until(counted, f"{door.component} counting the three forged packets")
            with pytest.raises(TimeoutError):
                intruder.recvfrom(65535)  # and it answered none
    members_unchanged(cluster)


def test_a_replayed_gossip_packet_is_dropped_and_counted(
        doors: list[Door], cluster: Cluster) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as replayer:
        replayer.bind(("127.0.0.1", 0))
        replayer.settimeout(10.0)
        for door in of_kind(doors, "gossip"):
            before = scrape(door, cluster, doors, ("replay",))
            assert before is not None, f"{door.component} does not count replayed packets"
            # A packet sealed with the cluster's key (the host's agent is its only member
            # that gossips, so no other member's packet passes by to capture): a probe the
            # member believes and acks, then the very same bytes again.
            target = (door.listener.reachable_host(), door.listener.port)
            ours = SealedEnvelope(cluster.keyring, "replayer", first_seq=time.time_ns(),
                                  salts=os.urandom)
            packet = ours.seal(encode(Message(sender="replayer",
                                              body=Ping(7, door.component))), 1)
            replayer.sendto(packet, target)
            replayer.recvfrom(65535)  # its ack: the packet was believed
            replayer.sendto(packet, target)

            def counted(d: Door = door, b: float = before) -> bool:
                return (scrape(d, cluster, doors, ("replay",)) or 0) >= b + 1

            until(counted, f"{door.component} counting the replayed packet")
    members_unchanged(cluster)


def test_tokens_are_stored_hashed_and_secrets_never_logged(cluster: Cluster) -> None:
    keys = cluster.private_keys()  # the CA's, and each component's own
    # The CA's, the operator's, and one per component (the image registry's serves its TLS).
    assert len(keys) == 2 + len(cluster.components())
    kept_on_purpose = {cluster.data / "api-token", cluster.data / "secrets-key",
                       cluster.data / "gossip-keyring", *keys}
    files = [p for p in cluster.data.rglob("*") if p.is_file() and p not in kept_on_purpose]
    assert any(p.suffix == ".log" for p in files)
    assert any(".db" in p.name for p in files)
    secrets = {**cluster.secrets(), **{f"the private key in {p}": k.decode()
                                       for p, k in keys.items()}}
    leaks = [f"{name} in {path}" for path in files for name, value in secrets.items()
             if value.encode() in bytes_of(path)]
    assert leaks == []
    assert not (cluster.data / "cluster-secret").exists()  # no shared secret left behind
    # The CA's key is in one place only; each component has a key of its own.
    assert list(cluster.data.rglob("ca-key.pem")) == [cluster.data / "tls" / "ca-key.pem"]
    assert len(set(keys.values())) == len(keys)
    digest = hashlib.sha256(cluster.app_token.encode()).hexdigest().encode()
    assert any(digest in bytes_of(p) for p in files if ".db" in p.name), "token hash not kept"
    for path in kept_on_purpose:
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"


def machine_pids(marker: str) -> list[int]:
    """The machine's program and the wrapper that runs it: both carry the marker in argv."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes().split(b"\0")[3:]:
                    found.append(int(entry.name))
            except OSError:
                continue
    return sorted(found)


def test_secrets_stay_out_of_command_lines_and_machines(cluster: Cluster) -> None:
    values = cluster.secrets()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            assert not [n for n, v in values.items() if v.encode() in cmdline], cmdline[:200]
    pids = machine_pids(cluster.marker)
    assert len(pids) >= 2, pids
    for pid in pids:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert not [n for n, v in values.items() if v.encode() in environ], pid
        for variable in (b"BODEGA_GOSSIP_KEYRING", b"BODEGA_SECRETS_KEY", b"BODEGA_API_TOKEN"):
            assert variable not in environ
    sealing, token = cluster.key("secrets-key").encode(), cluster.token.encode()
    # What each component holds, read from its memory, where its environment is: a forked
    # one's /proc/<pid>/environ is the fork server's, not what it was given.
    for component in cluster.components():  # only the broker needs the admin token
        held = memory_holds(component["pid"], (token, sealing))
        assert (token in held) == (component["role"] == "broker"), component["name"]
        # ... and only brokers and workers the secrets key: a proxy never opens a secret.
        assert (sealing in held) == (component["role"] in ("broker", "worker")), \
            component["name"]
    fork_server = cluster.fork_server()
    assert fork_server is not None  # bodega up forks its components by default
    # It passes each environment on unread, so no component forked later inherits another's.
    assert memory_holds(fork_server, (token, sealing)) == set()
    with cluster.admin() as api:
        answer = api.post(f"/v1/apps/alpha/machines/{cluster.alpha_machine}/exec", json={
            "command": [machine_python(), "-c", "import os; print(repr(dict(os.environ)))"]})
    assert answer.status_code == 200, answer.text
    assert not [n for n, v in values.items() if v in answer.json()["stdout"]]


def test_machine_commands_never_pass_through_a_shell(cluster: Cluster) -> None:
    hostile = hostile_arguments(cluster.canary)
    logs = [p for p in cluster.data.rglob("machine.log") if cluster.marker in p.read_text()]
    assert len(logs) == 1, logs
    printed = json.loads(logs[0].read_text().splitlines()[0])
    assert printed == [cluster.marker, *hostile]  # each argument arrived as written
    with cluster.admin() as api:
        run = api.post(f"/v1/apps/alpha/machines/{cluster.alpha_machine}/exec", json={
            "command": [machine_python(), "-c", ARGV_ECHO.split("; time")[0], *hostile]})
        assert run.status_code == 200, run.text
        assert json.loads(run.json()["stdout"]) == hostile
        split = api.post(f"/v1/apps/alpha/machines/{cluster.alpha_machine}/exec",
                         json={"cmd": "echo $(id) ; `id` | id"})
        assert split.status_code == 200, split.text
        assert split.json()["stdout"] == "$(id) ; `id` | id\n", split.text
    assert sorted(os.listdir(cluster.canary)) == []


# Run inside alpha's machine: what of the cluster's files and beta's processes it can touch.
PRYING = """
import json, os, sys
paths, pids, seen = sys.argv[1].split(","), sys.argv[2].split(","), {}
for path in paths:
    try:
        open(path, "rb").read(1)
        seen[path] = "read"
    except OSError as exc:
        seen[path] = type(exc).__name__
for pid in pids:
    try:
        os.kill(int(pid), 0)
        seen[pid] = "signalled"
    except OSError as exc:
        seen[pid] = type(exc).__name__
    try:  # another machine's environment holds its app's secrets
        open(f"/proc/{pid}/environ", "rb").read(1)
        seen[f"/proc/{pid}/environ"] = "read"
    except OSError as exc:
        seen[f"/proc/{pid}/environ"] = type(exc).__name__
print(json.dumps(seen))
"""


def test_a_machine_touches_neither_the_clusters_files_nor_another_apps_machines(
        cluster: Cluster) -> None:
    beta_dirs = [p for p in cluster.data.rglob(cluster.beta_machine) if p.is_dir()]
    assert beta_dirs, "beta's machine directory"
    files = [*cluster.data.rglob("*.db"), *cluster.data.rglob("*.log"),
             *(f for d in beta_dirs for f in d.rglob("*") if f.is_file())]
    beta_pids = machine_pids(f"{cluster.marker}-beta")
    assert len(files) > 5, files
    assert beta_pids, "beta's machine processes"
    with cluster.admin() as api:
        answer = api.post(f"/v1/apps/alpha/machines/{cluster.alpha_machine}/exec", json={
            "command": [machine_python(), "-c", PRYING, ",".join(map(str, files)),
                        ",".join(map(str, beta_pids))]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["exit_code"] == 0, answer.json()["stderr"]
    seen = json.loads(answer.json()["stdout"])
    touched = {what: how for what, how in seen.items() if how in ("read", "signalled")}
    assert touched == {}


def test_a_machine_writes_its_own_volume_as_its_own_user(cluster: Cluster) -> None:
    """Machines have users of their own; the volume a machine mounts is handed to its user."""
    users = set()
    for marker in (cluster.marker, f"{cluster.marker}-beta"):
        uids = {int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
                for pid in machine_pids(marker)}
        users |= uids - {0}  # the wrapper stays root; the program runs as the machine's user
    assert len(users) == 2, users
    guest = cluster.canary.parent / "mnt"
    write = f"import os; open('{guest}/probe', 'w').write(str(os.getuid()))"
    with cluster.admin() as api:
        volume = api.post("/v1/apps/alpha/volumes", json={"name": "data", "region": "ams",
                                                          "size_gb": 1})
        assert volume.status_code == 200, volume.text
        created = api.post("/v1/apps/alpha/machines", json={"config": {
            "image": "local/doors", "init": {"exec": [machine_python(), "-c", write]},
            "mounts": [{"volume": volume.json()["id"], "path": str(guest)}],
            "restart": {"policy": "no"}}})
        assert created.status_code == 200, created.text
        mid = created.json()["id"]
        until(lambda: api.get(f"/v1/apps/alpha/machines/{mid}").json()["state"] == "stopped",
              "the volume's machine ran and exited")
        events = api.get(f"/v1/apps/alpha/machines/{mid}/events").json()
    probes = list(cluster.data.rglob(f"volumes/{volume.json()['id']}/probe"))
    assert len(probes) == 1, events
    uid = int(probes[0].read_text())
    assert uid not in users | {0}
    assert probes[0].parent.stat().st_uid == uid


def bytes_of(path: Path) -> bytes:
    """A file's bytes, or none for one gone since it was listed (the metrics store's
    transaction files come and go as it writes)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
