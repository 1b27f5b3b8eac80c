"""Bad input gets a clear 4xx in the error shape, and nothing is written anywhere.

Each case is sent to a real broker over a real worker; afterwards the
broker's view (apps, machines, volumes) and the worker's store hold exactly
what they held before, so no machine (and so no process) was made.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from bodega.wire.transport.http import MAX_BODY, MAX_DEPTH
from bodega.worker.store import queries, volume_queries

from .broker_kit import MACHINE, Cluster
from .fuzz_kit import Target, admin_headers, error_problem, run_on, served_cluster


@dataclass
class Served:
    target: Target
    cluster: Cluster
    loop: Any
    http: httpx.Client

    def written(self) -> tuple[Any, ...]:
        """Everything a request could have written: the broker's view and the worker's store."""
        async def read() -> tuple[Any, ...]:
            worker = self.cluster.workers[0]
            machines = sorted(str((m.id, m.name, m.state, m.instance_id, m.config.to_wire()))
                              for m in queries.list_machines(worker.store.db,
                                                            include_destroyed=True))
            volumes = sorted((v.id, v.name, v.state, v.size_gb)
                             for v in volume_queries.list_volumes(worker.store.db, None, True))
            return machines, volumes
        store = run_on(self.loop, read())
        apps = self.http.get("/v1/apps").json()
        listed = self.http.get(f"/v1/apps/{self.target.app}/machines",
                               params={"include_deleted": "true"}).json()
        vols = self.http.get(f"/v1/apps/{self.target.app}/volumes",
                             params={"include_deleted": "true"}).json()
        return (store, sorted(a["name"] for a in apps["apps"]),
                sorted((m["id"], m["state"], m.get("config", {}).get("env"),
                        m.get("config", {}).get("metadata")) for m in listed),
                sorted(v["id"] for v in vols))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_cluster(tmp_path_factory.mktemp("bad-input")) as (target, c, loop), \
            httpx.Client(base_url=target.url, headers=admin_headers(), timeout=30) as http:
        yield Served(target, c, loop, http)


def refused(served: Served, method: str, path: str, expect: int = 400, **kw: Any) -> str:
    """Send a request that must be refused with ``expect``; return its error message."""
    before = served.written()
    response = served.http.request(method, path.format(m=served.target.machine_id,
                                                       v=served.target.volume_id), **kw)
    problem = error_problem(response.status_code, response.headers.get("content-type", ""),
                            response.content)
    assert problem is None, problem
    assert response.status_code == expect, response.text
    assert served.written() == before, "a refused request wrote something"
    return str(response.json()["error"])


def config(**extra: Any) -> dict[str, Any]:
    return {"config": {**MACHINE, **extra}}


# -- sizes ------------------------------------------------------------------------------------

def test_a_body_over_the_limit_is_refused_with_413(served: Served) -> None:
    body = json.dumps(config(env={"BIG": "x" * MAX_BODY})).encode()
    message = refused(served, "POST", "/v1/apps/fuzz/machines", 413, content=body)
    assert str(MAX_BODY) in message


def test_a_streamed_body_over_the_limit_is_cut_off_with_413(served: Served) -> None:
    def chunks() -> Iterator[bytes]:  # no content-length: the server must count as it reads
        yield b'{"config": {"image": "x", "env": {"A": "'
        for _ in range(64):
            yield b"y" * 65536
        yield b'"}}}'
    refused(served, "POST", "/v1/apps/fuzz/machines", 413, content=chunks())


def test_a_body_at_the_limit_is_read(served: Served) -> None:
    body = json.dumps({"config": {**MACHINE, "image": ""}}).encode()
    padded = body + b" " * (MAX_BODY - len(body))  # exactly the limit: read, then validated
    assert "image" in refused(served, "POST", "/v1/apps/fuzz/machines", content=padded)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5000, 200_000])
def test_deeply_nested_json_is_refused(served: Served, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = f'{{"config": {{"image": "x", "deep": {nested}}}}}'
    message = refused(served, "POST", "/v1/apps/fuzz/machines", content=body.encode())
    assert "nested" in message


@pytest.mark.parametrize("body", [
    b'{"config":', b"\xff\xfe{}", b'{"config": {"image": "x"}} trailing', b"NaN",
    b'{"config": {"image": "x", "guest": {"cpus": NaN}}}',
    b'{"config": {"image": "x", "restart": {"max_retries": ' + b"9" * 5000 + b"}}}",
    b"[1, 2]", b'"config"', b"",
])
def test_invalid_json_is_refused(served: Served, body: bytes) -> None:
    refused(served, "POST", "/v1/apps/fuzz/machines", content=body)


# -- ids and names --------------------------------------------------------------------------

@pytest.mark.parametrize("bad_id", ["nope", "%2e%2e", "..%2f..%2fetc", "0" * 200,
                                    "%00", "%0a", "vol_" + "a" * 20])
def test_bad_machine_ids_are_not_found(served: Served, bad_id: str) -> None:
    refused(served, "GET", f"/v1/apps/fuzz/machines/{bad_id}", 404)
    refused(served, "POST", f"/v1/apps/fuzz/machines/{bad_id}/stop", 404)
    refused(served, "DELETE", f"/v1/apps/fuzz/machines/{bad_id}", 404)


@pytest.mark.parametrize("bad_id", ["nope", "%2e%2e", "vol_..%2f..", "{m}", "%00"])
def test_bad_volume_ids_are_not_found(served: Served, bad_id: str) -> None:
    refused(served, "GET", f"/v1/apps/fuzz/volumes/{bad_id}", 404)
    refused(served, "DELETE", f"/v1/apps/fuzz/volumes/{bad_id}", 404)
    refused(served, "PUT", f"/v1/apps/fuzz/volumes/{bad_id}/extend", 404, json={"size_gb": 2})


NAMES = ["../x", "..", "%2e%2e", "a/b", "x\x00y", "ok\n", "tab\there", "\x1b[31m", "Upper",
         "-lead", "x" * 64, ""]


@pytest.mark.parametrize("name", NAMES)
def test_bad_app_names_are_refused(served: Served, name: str) -> None:
    refused(served, "POST", "/v1/apps", json={"app_name": name, "org_slug": "personal"})


@pytest.mark.parametrize("name", NAMES)
def test_bad_machine_names_are_refused(served: Served, name: str) -> None:
    if name == "":
        name = " "  # "" means "make one up"
    refused(served, "POST", "/v1/apps/fuzz/machines", json={**config(), "name": name})


@pytest.mark.parametrize("name", [*NAMES, "data\n"])
def test_bad_volume_names_are_refused(served: Served, name: str) -> None:
    refused(served, "POST", "/v1/apps/fuzz/volumes", json={"name": name, "size_gb": 1})


@pytest.mark.parametrize("env", [
    {"A\x00B": "v"}, {"A": "v\x00"}, {"": "v"}, {"A=B": "v"}, {"A\nB": "v"}, {"\x1b": "v"},
])
def test_control_characters_and_nul_in_env_are_refused(served: Served,
                                                       env: dict[str, str]) -> None:
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(env=env))
    refused(served, "POST", "/v1/apps/fuzz/machines/{m}", json=config(env=env))


@pytest.mark.parametrize("metadata", [{"k\x00": "v"}, {"k": "v\x00"}, {"": "v"}])
def test_control_characters_and_nul_in_metadata_are_refused(served: Served,
                                                            metadata: dict[str, str]) -> None:
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(metadata=metadata))
    refused(served, "PUT", "/v1/apps/fuzz/machines/{m}/metadata", json={"metadata": metadata})


# -- absurd sizes and counts ----------------------------------------------------------------

@pytest.mark.parametrize("guest", [
    {"cpus": 10**9, "memory_mb": 256}, {"cpus": 1, "memory_mb": -1},
    {"cpus": 1, "memory_mb": 10**12}, {"cpus": -1, "memory_mb": 256},
    {"cpus": 1, "memory_mb": 256, "gpus": 10**9}, {"cpus": 10**30, "memory_mb": 256},
    {"cpus": 1.5, "memory_mb": 256}, {"cpus": "1", "memory_mb": "lots"},
])
def test_absurd_machine_sizes_are_refused(served: Served, guest: dict[str, Any]) -> None:
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(guest=guest))
    refused(served, "POST", "/v1/platform/placements", json={"compute": guest})


@pytest.mark.parametrize("size_gb", [-1, 0, 10**6, 10**12, 10**30])
def test_absurd_volume_sizes_are_refused(served: Served, size_gb: int) -> None:
    refused(served, "POST", "/v1/apps/fuzz/volumes", json={"name": "big", "size_gb": size_gb})
    refused(served, "PUT", "/v1/apps/fuzz/volumes/{v}/extend", json={"size_gb": size_gb})


@pytest.mark.parametrize("field", ["env", "metadata"])
def test_huge_maps_are_refused(served: Served, field: str) -> None:
    huge = {f"K{i}": "v" for i in range(5000)}
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(**{field: huge}))


def test_huge_metadata_replacement_is_refused(served: Served) -> None:
    huge = {f"k{i}": "v" for i in range(5000)}
    refused(served, "PUT", "/v1/apps/fuzz/machines/{m}/metadata", json={"metadata": huge})


@pytest.mark.parametrize("extra", [
    {"files": [{"guest_path": f"/f{i}", "raw_value": "eA=="} for i in range(5000)]},
    {"services": [{"internal_port": 8080} for _ in range(5000)]},
    {"processes": [{"cmd": ["x"]} for _ in range(5000)]},
    {"checks": {f"c{i}": {"type": "tcp", "port": 80} for i in range(5000)}},
])
def test_huge_lists_are_refused(served: Served, extra: dict[str, Any]) -> None:
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(**extra))


# -- keys in paths ----------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "expect"), [
    ("x%2F..%2F..%2Fstop", 404), ("%2E%2E%2Fstop", 404), ("k%2Fv", 404),  # no such route
    ("%00", 400), ("%0A", 400), ("%1B", 400), ("k" * 257, 400),
    ("%2E%2E", 400), ("%2E", 400)])  # ".." would climb to the machine itself on the worker
def test_bad_metadata_keys_are_refused(served: Served, key: str, expect: int) -> None:
    path = "/v1/apps/fuzz/machines/{m}/metadata/" + key
    before = served.http.get(f"/v1/apps/fuzz/machines/{served.target.machine_id}").json()
    refused(served, "POST", path, expect, json={"value": "v"})
    refused(served, "DELETE", path, expect)
    refused(served, "GET", path, expect)
    after = served.http.get(f"/v1/apps/fuzz/machines/{served.target.machine_id}").json()
    assert (after["state"], after["instance_id"]) == (before["state"], before["instance_id"])


@pytest.mark.parametrize("key", ["a?b", "a#b", "...", "50%", "a b", "k.v"])
def test_metadata_keys_are_sent_on_whole(served: Served, key: str) -> None:
    """A key is one path segment to the worker too: a '?' or '#' in it must not cut it short."""
    path = f"/v1/apps/fuzz/machines/{served.target.machine_id}/metadata/{quote(key, safe='')}"
    assert served.http.post(path, json={"value": "v"}).status_code == 204
    try:
        metadata = served.http.get(f"/v1/apps/fuzz/machines/{served.target.machine_id}"
                                   "/metadata").json()
        assert metadata.get(key) == "v", metadata
    finally:
        served.http.delete(path)


@pytest.mark.parametrize("path", ["../x", "data", "/data/../../etc", "/", "/a b", "/a=b",
                                  "/a\x00b", "/a\nb", "/./data", "/" + "d" * 300])
def test_bad_mount_paths_are_refused(served: Served, path: str) -> None:
    mounts = [{"volume": served.target.volume_id, "path": path}]
    refused(served, "POST", "/v1/apps/fuzz/machines", json=config(mounts=mounts))


@pytest.mark.parametrize(("file", "said"), [
    ({"guest_path": "etc/x", "raw_value": "eA=="}, "files guest_path"),
    ({"guest_path": "/x"}, "exactly one of raw_value and secret_name"),
    ({"guest_path": "/x", "raw_value": "%%%"}, "raw_value is not base64"),
    ({"guest_path": "/x", "raw_value": "eA==", "mode": -1}, "mode"),
    ({"guest_path": "/x", "raw_value": "eA==", "owner": "root"}, "owner"),
])
def test_bad_files_are_refused(served: Served, file: dict[str, Any], said: str) -> None:
    assert said in refused(served, "POST", "/v1/apps/fuzz/machines", json=config(files=[file]))


def test_files_for_a_host_process_are_refused(served: Served) -> None:
    body = {"config": {**MACHINE, "image": "python3",
                       "files": [{"guest_path": "/x", "raw_value": "eA=="}]}}
    assert "files need an image machine" in refused(served, "POST", "/v1/apps/fuzz/machines",
                                                    json=body)
