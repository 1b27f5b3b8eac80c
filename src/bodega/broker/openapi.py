"""The broker's OpenAPI document, built from its own request models and route table.

Request schemas come from the pydantic models the handlers validate with,
so the document cannot drift from what is accepted; responses name the
Machines API objects they return. ``/docs`` renders it as a plain page that
needs nothing from the internet.
"""

from __future__ import annotations

import html
from functools import cache

from pydantic import BaseModel

from bodega.broker.openapi_schemas import RESPONSES, STR
from bodega.model.json import JsonObject
from bodega.wire.public import fly, moves, tokens
from bodega.wire.public import fly_certificates as certs
from bodega.wire.public import secret_keys as keys
from bodega.wire.public.autoscale import SetAutoscale

M = "/v1/apps/{app_name}/machines/{machine_id}"
V = "/v1/apps/{app_name}/volumes/{volume_id}"
K = "/v1/apps/{app_name}/secretkeys/{secret_name}"
C = "/v1/apps/{app_name}/certificates"

# (method, path, summary, request model, response schema name or None)
OPERATIONS: list[tuple[str, str, str, type[BaseModel] | None, str | None]] = [
    ("get", "/v1/apps", "List apps (filter with org_slug)", None, "ListAppsResponse"),
    ("post", "/v1/apps", "Create an app", fly.CreateAppRequest, "App"),
    ("get", "/v1/apps/{app_name}", "Show an app", None, "App"),
    ("delete", "/v1/apps/{app_name}", "Delete an app with its machines and volumes", None, None),
    ("post", "/v1/apps/{app_name}/deploy_token", "Create a token scoped to the app",
     fly.CreateAppDeployTokenRequest, "TokenResponse"),
    ("get", "/v1/apps/{app_name}/ip_assignments", "List the app's IP assignments (recorded; "
     "the proxy does not bind them)", None, "listIPAssignmentsResponse"),
    ("post", "/v1/apps/{app_name}/ip_assignments", "Assign an address (type: v4, v6, "
     "private_v6, shared_v4)", fly.AssignIpRequest, "IPAssignment"),
    ("delete", "/v1/apps/{app_name}/ip_assignments/{ip}", "Remove an IP assignment", None,
     None),
    ("get", "/v1/apps/{app_name}/releases", "bodega: the app's releases, newest first", None,
     None),
    ("post", "/v1/apps/{app_name}/releases", "bodega: record the next release (running)",
     None, None),
    ("get", "/v1/apps/{app_name}/releases/{version}", "bodega: one release", None, None),
    ("patch", "/v1/apps/{app_name}/releases/{version}", "bodega: a release's status "
     "(complete, failed, interrupted) and failure", None, None),
    ("get", "/v1/apps/{app_name}/autoscale", "bodega: the app's autoscale setting, its "
     "evaluator and its last decision", None, None),
    ("put", "/v1/apps/{app_name}/autoscale", "bodega: autoscale the app (min, max, and "
     "concurrency or a PromQL expr)", SetAutoscale, None),
    ("delete", "/v1/apps/{app_name}/autoscale", "bodega: stop autoscaling the app", None, None),
    ("get", "/v1/apps/{app_name}/secrets", "List the app's secrets (names and digests; values "
     "are never shown)", None, "AppSecrets"),
    ("post", "/v1/apps/{app_name}/secrets", "Set secrets (null unsets one); restarts nothing",
     fly.AppSecretsUpdateRequest, "AppSecretsUpdateResp"),
    ("get", "/v1/apps/{app_name}/secrets/{secret_name}", "Show one secret (no value)", None,
     "AppSecret"),
    ("post", "/v1/apps/{app_name}/secrets/{secret_name}", "Set one secret",
     fly.SetAppSecretRequest, "AppSecret"),
    ("delete", "/v1/apps/{app_name}/secrets/{secret_name}", "Delete one secret", None, None),
    ("get", "/v1/apps/{app_name}/secretkeys", "List the app's secret keys (types, min_version; "
     "never their material)", None, "SecretKeys"),
    ("get", K, "Show a secret key (type, times, public key)", None, "SecretKey"),
    ("post", K, "Set a secret key from its material (type: hs256, hs384, hs512, nacl_auth, "
     "nacl_sign, xaes256gcm)", keys.SetSecretkeyRequest, "SetSecretkeyResponse"),
    ("delete", K, "Delete a secret key", None, "DeleteSecretkeyResponse"),
    ("post", f"{K}/generate", "Generate a random secret key of a type", keys.SetSecretkeyRequest,
     "SetSecretkeyResponse"),
    ("post", f"{K}/encrypt", "Encrypt with an xaes256gcm key", keys.EncryptSecretkeyRequest,
     "EncryptSecretkeyResponse"),
    ("post", f"{K}/decrypt", "Decrypt with an xaes256gcm key", keys.DecryptSecretkeyRequest,
     "DecryptSecretkeyResponse"),
    ("post", f"{K}/sign", "Sign with an hs*, nacl_auth or nacl_sign key",
     keys.SignSecretkeyRequest, "SignSecretkeyResponse"),
    ("post", f"{K}/verify", "Verify a signature (204; 400 if it does not verify)",
     keys.VerifySecretkeyRequest, None),
    ("get", C, "List the app's certificates (filter: hostname substring, cursor, limit <= "
     "500)", None, "listCertificatesResponse"),
    ("post", C, "bodega: have the cluster CA issue (or renew) a certificate for a hostname",
     certs.IssueCertificateRequest, "CertificateDetail"),
    ("post", f"{C}/custom", "Import a certificate: a PEM fullchain (leaf first) and its key, "
     "checked to be a pair covering the hostname", certs.CustomCertificateRequest,
     "CertificateDetail"),
    ("post", f"{C}/acme", "Refused with a 422: this cluster has no ACME client (use custom, or "
     "the cluster CA)", certs.AcmeCertificateRequest, "CertificateDetail"),
    ("get", f"{C}/{{hostname}}", "Show a certificate", None, "CertificateDetail"),
    ("delete", f"{C}/{{hostname}}", "Remove a certificate (the proxies stop serving it)",
     None, None),
    ("post", f"{C}/{{hostname}}/check", "Check the stored certificate and key again: a pair, "
     "covering the hostname, not expired", None, "CertificateCheckResponse"),
    ("delete", f"{C}/{{hostname}}/acme", "Remove the hostname's cluster CA certificate", None,
     "CertificateDetail"),
    ("delete", f"{C}/{{hostname}}/custom", "Remove the hostname's imported certificate", None,
     "destroyCustomCertificateResponse"),
    ("get", "/v1/apps/{app_name}/logs", "bodega: the app's logs as NDJSON lines (machine, "
     "region, follow, since, limit)", None, None),
    ("get", "/v1/orgs/{org_slug}/machines", "List every machine of an org's apps, oldest "
     "update first (include_deleted, region, state, summary, updated_after, cursor, limit)",
     None, "OrgMachinesResponse"),
    ("get", "/v1/orgs/{org_slug}/volumes", "List every volume of an org's apps, oldest update "
     "first (include_deleted, region, state, summary, updated_after, cursor, limit)", None,
     "OrgVolumesResponse"),
    ("get", "/v1/apps/{app_name}/machines",
     "List machines (region, state, include_deleted, summary, metadata.KEY=VALUE)", None,
     "MachineList"),
    ("post", "/v1/apps/{app_name}/machines", "Create (place) a machine; Idempotency-Key header "
     "makes retries safe", fly.CreateMachineRequest, "Machine"),
    ("get", M, "Show a machine", None, "Machine"),
    ("post", M, "Update a machine (a new version)", fly.UpdateMachineRequest, "Machine"),
    ("delete", M, "Destroy a machine (force or kill to stop it first)", None, "Ok"),
    ("post", f"{M}/start", "Start a machine", None, "StartResponse"),
    ("post", f"{M}/stop", "Stop a machine (signal, then SIGKILL after timeout)",
     fly.StopRequest, "Ok"),
    ("post", f"{M}/restart", "Restart a machine", None, "Ok"),
    ("post", f"{M}/move", "bodega: move the machine to another worker (worker, or region; "
     "the same id, config and events; a running one is stopped and started there)",
     moves.MoveMachineRequest, "Machine"),
    ("post", f"{M}/signal", "Send a signal", fly.SignalRequest, "Ok"),
    ("post", f"{M}/suspend", "Suspend: freeze the machine, memory kept; start resumes it",
     None, "Ok"),
    ("post", f"{M}/cordon", "Take the machine out of proxy routing", None, "Ok"),
    ("post", f"{M}/uncordon", "Put the machine back into proxy routing", None, "Ok"),
    ("post", f"{M}/exec", "Run a command in the machine's context", fly.ExecRequest,
     "ExecResponse"),
    ("get", f"{M}/ps", "The machine's processes", None, None),
    ("get", f"{M}/wait", "Wait for a state (state, timeout <= 60, version, from_event_id)",
     None, "WaitResponse"),
    ("get", f"{M}/events", "Events, newest first (limit <= 50)", None, None),
    ("get", f"{M}/versions", "The machine's versions", None, None),
    ("get", f"{M}/placement", "bodega: why the machine was placed where it is", None, None),
    ("get", f"{M}/memory", "The machine's memory limit and what is left of it", None,
     "MemoryResponse"),
    ("put", f"{M}/memory", "Set the machine's memory cgroup limit live (at most its "
     "reservation, at least what it uses)", fly.SetMemoryLimitRequest, "MemoryResponse"),
    ("post", f"{M}/memory/reclaim", "Have the kernel reclaim the machine's memory (amount_mb; "
     "none: all it can)", fly.ReclaimMemoryRequest, "ReclaimMemoryResponse"),
    ("get", f"{M}/lease", "Show the lease", None, "LeaseEnvelope"),
    ("post", f"{M}/lease", "Acquire or refresh (fly-machine-lease-nonce) a lease",
     fly.CreateLeaseRequest, "LeaseEnvelope"),
    ("delete", f"{M}/lease", "Release the lease (needs its nonce)", None, None),
    ("get", f"{M}/metadata", "Metadata", None, None),
    ("put", f"{M}/metadata", "Replace metadata", fly.UpdateMetadataRequest, None),
    ("patch", f"{M}/metadata", "Merge metadata (null deletes a key)", fly.UpdateMetadataRequest,
     None),
    ("get", f"{M}/metadata/{{key}}", "One metadata value", None, None),
    ("post", f"{M}/metadata/{{key}}", "Set one metadata value", fly.UpsertMetadataKeyRequest,
     None),
    ("delete", f"{M}/metadata/{{key}}", "Delete one metadata value", None, None),
    ("get", "/v1/apps/{app_name}/volumes", "List volumes", None, None),
    ("post", "/v1/apps/{app_name}/volumes", "Create (place) a volume", fly.CreateVolumeRequest,
     "Volume"),
    ("get", V, "Show a volume", None, "Volume"),
    ("put", V, "Update a volume", fly.UpdateVolumeRequest, "Volume"),
    ("delete", V, "Delete a volume", None, "Volume"),
    ("put", f"{V}/extend", "Grow a volume", fly.ExtendVolumeRequest, None),
    ("get", f"{V}/snapshots", "The volume's snapshots, oldest first (kept retention_days)",
     None, None),
    ("post", f"{V}/snapshots", "Snapshot the volume: a copy taken with its machine frozen",
     None, "VolumeSnapshot"),
    ("post", "/v1/tokens/authenticate", "Verify a token (body: header) and say its caveats",
     tokens.AuthenticateTokenRequest, "VerifiedTokens"),
    ("post", "/v1/tokens/authorize", "Verify a token and check it against an access (403 if "
     "it may not)", tokens.AuthorizeTokenRequest, "authorizeResponse"),
    ("get", "/v1/tokens/current", "The caller's token: its apps, org and machine", None,
     "CurrentTokenResponse"),
    ("post", "/v1/tokens/kms", "A one-hour token for the caller's app's secret keys only "
     "(text/plain)", None, None),
    ("post", "/v1/tokens/oidc", "An OIDC identity token (JWT, ES256) for the calling machine; "
     "verify it with /.well-known/jwks.json", tokens.CreateOIDCTokenRequest, None),
    ("post", "/v1/platform/placements", "Simulate a placement without reserving",
     fly.PlacementsRequest, None),
    ("get", "/v1/platform/regions", "Capacity per region for a size (size, or cpus/memory_mb)",
     None, None),
    ("get", "/v1/cluster", "bodega: what a client needs to deploy here (its image registry)",
     None, "ClusterInfo"),
    ("get", "/v1/cluster/members", "bodega: membership as the broker's registry sees it", None,
     None),
    ("get", "/v1/cluster/workers", "bodega: workers with their capacity and status", None, None),
    ("get", "/v1/cluster/hosts", "bodega: workers with their host and drain cordon", None, None),
    ("post", "/v1/cluster/hosts/{name}/drain", "bodega: cordon a host's workers (or one worker) "
     "for a drain: placement refuses them saying draining", None, None),
    ("get", "/v1/cluster/machines", "bodega: every machine with its app and worker", None,
     None),
    ("post", "/v1/cluster/hosts/{name}/undrain", "bodega: lift a host's drain cordon", None,
     None),
]

# Operations whose success is not a 200 with a body: (method, path) -> (status, has a body).
SUCCESS: dict[tuple[str, str], tuple[int, bool]] = {
    ("post", "/v1/apps"): (201, True),
    ("post", "/v1/apps/{app_name}/secrets/{secret_name}"): (201, True),
    ("post", C): (201, True),
    ("post", f"{C}/custom"): (201, True),
    ("delete", f"{C}/{{hostname}}"): (204, False),
    ("post", K): (201, True),
    ("post", f"{K}/generate"): (201, True),
    ("post", f"{K}/verify"): (204, False),
    ("delete", "/v1/apps/{app_name}"): (202, False),
    ("post", f"{M}/lease"): (201, True),
    ("delete", f"{M}/lease"): (204, False),
    ("put", f"{M}/metadata"): (204, False),
    ("patch", f"{M}/metadata"): (204, False),
    ("post", f"{M}/metadata/{{key}}"): (204, False),
    ("delete", f"{M}/metadata/{{key}}"): (204, False),
}
# Answers described by the models the handlers answer with, by the Machines API's names.
RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "listCertificatesResponse": certs.CertificateListing,
    "CertificateDetail": certs.CertificateDetail,
    "CertificateCheckResponse": certs.CertificateCheck,
    "destroyCustomCertificateResponse": certs.CustomCertificateRemoved,
}


def _parameters(path: str) -> list[JsonObject]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [{"name": n, "in": "path", "required": True, "schema": STR} for n in names]


@cache
def openapi_document() -> JsonObject:
    schemas: JsonObject = dict(RESPONSES)
    bodies = {m.__name__: m for *_, m, _ in OPERATIONS if m is not None}
    for name, described in {**RESPONSE_MODELS, **bodies}.items():
        schema = described.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[name] = schema
    paths: dict[str, JsonObject] = {}
    for method, path, summary, model, response in OPERATIONS:
        code, has_body = SUCCESS.get((method, path), (200, True))
        operation: JsonObject = {
            "summary": summary, "operationId": f"{method}_{path}".replace("/", "_")
            .replace("{", "").replace("}", ""),
            "parameters": _parameters(path),
            "responses": {
                str(code): {"description": "OK", **({"content": {"application/json": {
                    "schema": {"$ref": f"#/components/schemas/{response}"}}}}
                    if response and has_body else {})},
                "default": {"description": "An error", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorResponse"}}}},
            },
        }
        if model is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "bodega Machines API", "version": "1",
                 "description": "The Fly Machines API v1 subset bodega serves, plus bodega's "
                                "own additions. Authenticate with Authorization: Bearer TOKEN."},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


def docs_page() -> str:
    rows = "\n".join(
        f"<tr><td><code>{m.upper()}</code></td><td><code>{html.escape(p)}</code></td>"
        f"<td>{html.escape(s)}</td></tr>" for m, p, s, _, _ in OPERATIONS)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>bodega API</title>"
        "<style>body{font-family:sans-serif;margin:2em}td{padding:2px 12px}"
        "code{font-size:90%}</style></head><body><h1>bodega Machines API</h1>"
        "<p>The Fly Machines API v1 subset, with bodega's additions. Machine-readable: "
        "<a href='/openapi.json'>/openapi.json</a>. Authenticate with "
        "<code>Authorization: Bearer TOKEN</code>.</p>"
        f"<table>{rows}</table></body></html>"
    )
