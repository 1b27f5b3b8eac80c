"""Every operation of Fly's Machines API document is served by bodega: the work list.

Reads the reference document (``fly-machines-openapi.json`` beside this file, a copy of
the published Machines API spec) and a real broker's ``/openapi.json``, compares them
operation by operation (method and path, path parameters by position), and then asks
the broker each operation the document names, so one listed but not routed fails too.
On a gap it prints the operations the reference has and bodega lacks, by operationId:
all 76 are required, with no gap kept aside.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx

from .broker_kit import in_process_cluster

REFERENCE = Path(__file__).with_name("fly-machines-openapi.json")
METHODS = ("get", "post", "put", "patch", "delete")
PARAM = re.compile(r"\{[^}]+\}")


def operations(document: dict[str, object], prefix: str = "") -> dict[tuple[str, str], str]:
    """(METHOD, path with parameters as ``{}``) -> operationId (or the path)."""
    found: dict[tuple[str, str], str] = {}
    paths = document["paths"]
    assert isinstance(paths, dict)
    for path, ops in paths.items():
        for method, op in ops.items():
            if method in METHODS:
                key = (method.upper(), PARAM.sub("{}", path.removeprefix(prefix)))
                found[key] = str(op.get("operationId", path))
    return found


def reference_operations() -> dict[tuple[str, str], str]:
    return operations(json.loads(REFERENCE.read_text()))


def work_list(missing: dict[tuple[str, str], str]) -> str:
    lines = [f"  {op:34} {method:6} /v1{path}" for (method, path), op in sorted(
        missing.items(), key=lambda item: (item[0][1], item[0][0]))]
    return f"{len(missing)} operations of the reference are missing:\n" + "\n".join(lines)


def test_the_reference_document_has_76_operations() -> None:
    # The count the issue was filed with: a changed copy is noticed, not silently followed.
    assert len(reference_operations()) == 76


async def test_bodega_serves_every_operation_of_the_reference(tmp_path: Path) -> None:
    reference = reference_operations()
    async with in_process_cluster(tmp_path) as c:
        await c.add_worker("ams-1")
        await c.add_broker()
        async with c.api() as api:
            document = (await api.get("/openapi.json")).json()
            documented = operations(document, prefix="/v1")
            missing = {key: op for key, op in reference.items() if key not in documented}
            # Documented is not enough: the route must answer with something other than
            # "no such route" (an unknown app's 404 names the app, not the route).
            unrouted: dict[tuple[str, str], str] = {}
            for (method, path), op in reference.items():
                if (method, path) in missing:
                    continue
                url = "/v1" + path.replace("{}", "nosuchthing")
                answer = await api.request(method, url, json={} if method != "GET" else None)
                if answer.status_code == 405 or _no_route(answer):
                    unrouted[(method, path)] = op
    gaps = {**missing, **unrouted}
    assert not gaps, work_list(gaps)


def _no_route(answer: httpx.Response) -> bool:
    try:
        body = answer.json()
    except ValueError:
        return True
    error = str(body.get("error", ""))
    return answer.status_code == 404 and error.startswith("not found: no route")
