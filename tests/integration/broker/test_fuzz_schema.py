"""schemathesis drives the broker from OpenAPI documents: bodega's own and Fly's.

Every operation bodega serves is fuzzed with schema-valid (positive) and
schema-breaking (negative) requests against a real broker and worker. Most
cases aim at the live app, machine and volume (so handlers get past their
lookups); the rest at generated names. Most carry the admin token; some none,
a bad one, or another app's token. Every answer must:

- come within ``REQUEST_TIMEOUT`` (no hang);
- never be a 5xx; every 4xx is ``{"error", "status"}`` as JSON;
- for bodega's own document, conform to it: documented status, content type
  and response schema.

``BODEGA_FUZZ_EXAMPLES`` sets the cases per operation and mode (``make
fuzz`` runs tens of thousands of cases; ``make test`` a few hundred). The
Fly document (``fly-machines-openapi.json``, Apache-2.0 as its ``info``
says) is a copy of the published Machines API spec.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bodega.broker.openapi import OPERATIONS, openapi_document

from .broker_kit import ADMIN
from .fuzz_kit import REQUEST_TIMEOUT, TALLY, Target, error_problem, served_cluster

EXAMPLES = int(os.environ.get("BODEGA_FUZZ_EXAMPLES", "2"))
FLY_DOCUMENT = Path(__file__).with_name("fly-machines-openapi.json")
SERVED = {(method, path.removeprefix("/v1")) for method, path, *_ in OPERATIONS}
# Calls that would take the live resources away from the cases after them.
DESTRUCTIVE = {("DELETE", "app_name"), ("DELETE", "machine_id"), ("DELETE", "volume_id")}


def fly_document() -> dict[str, Any]:
    """Fly's document cut down to the operations bodega serves."""
    doc: dict[str, Any] = json.loads(FLY_DOCUMENT.read_text())
    doc["paths"] = {path: {m: op for m, op in ops.items() if (m, path) in SERVED}
                    for path, ops in doc["paths"].items()}
    doc["paths"] = {path: ops for path, ops in doc["paths"].items() if ops}
    return doc


SCHEMAS = {"bodega": schemathesis.openapi.from_dict(openapi_document()),
           "fly": schemathesis.openapi.from_dict(fly_document())}
OPERATIONS_BY_LABEL = {(name, operation.label): operation
                       for name, schema in SCHEMAS.items()
                       for operation in (r.ok() for r in schema.get_all_operations()
                                         if isinstance(r, Ok))}
BASES = {"bodega": "", "fly": "/v1"}
CALLERS = ["admin"] * 6 + ["none", "bad", "other-app"]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with served_cluster(tmp_path_factory.mktemp("schema-fuzz")) as (served, _c, _loop):
        yield served


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def test_every_served_operation_is_fuzzed_from_both_documents() -> None:
    bodega = {label for name, label in OPERATIONS_BY_LABEL if name == "bodega"}
    fly = {label for name, label in OPERATIONS_BY_LABEL if name == "fly"}
    assert len(bodega) == len(OPERATIONS)
    assert len(fly) >= 40, sorted(fly)  # every Machines API route bodega serves


def headers_for(caller: str, target: Target) -> dict[str, str]:
    token = {"admin": ADMIN, "bad": "not-a-token", "other-app": target.other_app_token,
             "none": None}[caller]
    return {"authorization": f"Bearer {token}"} if token else {}


def aim(case: Any, target: Target) -> None:
    """Point the case at the live app, machine and volume, unless it would destroy them."""
    live = {"app_name": target.app, "machine_id": target.machine_id,
            "volume_id": target.volume_id}
    names = [n for n in case.operation.path.split("/") if n.startswith("{")]
    last = names[-1][1:-1] if names and case.operation.path.endswith(names[-1]) else None
    for name, value in live.items():
        if name in (case.path_parameters or {}) and not (
                case.method.upper() == "DELETE" and name == last):
            case.path_parameters[name] = value
    if case.operation.path.endswith("/wait"):
        case.query = {**(case.query or {}), "timeout": 1}  # a real wait would take 60 s


def content_type(response: Response) -> str:
    values = {k.lower(): v for k, v in response.headers.items()}.get("content-type") or [""]
    return values[0]


def check(name: str, case: Any, response: Response) -> list[str]:
    problems = []
    problem = error_problem(response.status_code, content_type(response), response.content)
    if problem is not None:
        problems.append(problem)
    if name == "bodega":
        try:
            case.validate_response(response, checks=[
                status_code_conformance, content_type_conformance,
                response_schema_conformance])
        except FailureGroup as exc:
            problems.append(f"does not conform to bodega's document: {exc}")
    return problems


def release_lease(session: requests.Session, case: Any, response: Response,
                  target: Target, base: str) -> None:
    """A lease taken on the live machine would lock the cases after it out: give it back."""
    if case.method.upper() != "POST" or not case.operation.path.endswith("/lease") \
            or response.status_code != 201:
        return
    nonce = (json.loads(response.content).get("data") or {}).get("nonce")
    if nonce:
        session.delete(f"{target.url}{base}/apps/{target.app}/machines/{target.machine_id}"
                       "/lease", headers={"authorization": f"Bearer {ADMIN}",
                                          "fly-machine-lease-nonce": nonce},
                       timeout=REQUEST_TIMEOUT)


@pytest.mark.parametrize(("name", "label"), sorted(OPERATIONS_BY_LABEL))
def test_operation_answers_within_the_contract(target: Target, session: requests.Session,
                                               name: str, label: str) -> None:
    operation = OPERATIONS_BY_LABEL[(name, label)]
    base = BASES[name]
    failures: list[str] = []
    strategy = st.one_of(operation.as_strategy(GenerationMode.POSITIVE),
                         operation.as_strategy(GenerationMode.NEGATIVE))

    @settings(max_examples=EXAMPLES * 2, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy, live=st.integers(0, 3), caller=st.sampled_from(CALLERS))
    def fuzz(case: Any, live: int, caller: str) -> None:
        if live:
            aim(case, target)
        TALLY.cases += 1
        try:
            response = case.call(base_url=target.url + base, session=session,
                                 headers=headers_for(caller, target), timeout=REQUEST_TIMEOUT)
        except requests.Timeout:
            problems = [f"no answer within {REQUEST_TIMEOUT} s"]
        else:
            problems = check(name, case, response)
            release_lease(session, case, response, target, base)
        if problems:
            TALLY.failures += 1
            if len(failures) < 5:
                failures.append(f"{'; '.join(problems)}\n    {case.as_curl_command()}")

    fuzz()
    assert not failures, f"{label} ({name} document):\n" + "\n".join(failures)
