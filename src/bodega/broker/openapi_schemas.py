"""The response schemas of the broker's OpenAPI document, by the Machines API's names.

Request schemas come from the pydantic models themselves (``openapi.py``); these name
the objects the answers are, field for field as the Machines API's schemas have them.
"""

from __future__ import annotations

from bodega.model.json import JsonObject

STR, _INT, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_BYTES = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 255}}
RESPONSES: dict[str, JsonObject] = {
    "ErrorResponse": {"type": "object", "properties": {
        "error": STR, "status": {"type": "string", "enum": [
            "unknown", "insufficient_capacity", "volume_placement_capacity", "name_taken",
            "invalid_argument", "not_found", "failed_precondition", "deadline_exceeded",
            "unauthenticated", "permission_denied", "unavailable", "unimplemented",
            "method_not_allowed", "rate_limited", "resource_exhausted"]},
        "details": {"type": "object"}}},
    "Machine": {"type": "object", "properties": {
        "id": STR, "name": STR, "state": STR, "region": STR, "instance_id": STR,
        "version": STR, "private_ip": STR, "config": {"type": "object"},
        "image_ref": {"type": "object"}, "created_at": STR, "updated_at": STR,
        "events": {"type": "array", "items": {"type": "object"}}, "nonce": STR,
        "host_status": STR, "cordoned": _BOOL,
        "checks": {"type": "array", "items": {"$ref": "#/components/schemas/CheckStatus"}}}},
    "CheckStatus": {"type": "object", "properties": {
        "name": STR, "status": {"type": "string", "enum": ["passing", "warning", "critical"]},
        "output": STR, "updated_at": STR}},
    "AppSecret": {"type": "object", "properties": {
        "name": STR, "digest": STR, "created_at": STR, "updated_at": STR}},
    "AppSecrets": {"type": "object", "properties": {"secrets": {
        "type": "array", "items": {"$ref": "#/components/schemas/AppSecret"}}}},
    "AppSecretsUpdateResp": {"type": "object", "properties": {
        "version": _INT, "secrets": {"type": "array", "items": {
            "$ref": "#/components/schemas/AppSecret"}}}},
    "SecretKey": {"type": "object", "properties": {
        "name": STR, "type": STR, "created_at": STR, "updated_at": STR,
        "public_key": _BYTES}},
    "SecretKeys": {"type": "object", "properties": {"secret_keys": {
        "type": "array", "items": {"$ref": "#/components/schemas/SecretKey"}}}},
    "SetSecretkeyResponse": {"type": "object", "properties": {
        "name": STR, "type": STR, "created_at": STR, "updated_at": STR,
        "public_key": _BYTES, "version": _INT, "Version": _INT}},
    "DeleteSecretkeyResponse": {"type": "object", "properties": {
        "version": _INT, "Version": _INT}},
    "EncryptSecretkeyResponse": {"type": "object", "properties": {"ciphertext": _BYTES}},
    "DecryptSecretkeyResponse": {"type": "object", "properties": {"plaintext": _BYTES}},
    "SignSecretkeyResponse": {"type": "object", "properties": {"signature": _BYTES}},
    "VerifiedToken": {"type": "object", "properties": {"header": STR, "caveats": {
        "type": "object", "properties": {"caveats": {"type": "array", "items": {
            "type": "object"}}}}}},
    "VerifiedTokens": {"type": "array", "items": {"$ref": "#/components/schemas/VerifiedToken"}},
    "authorizeResponse": {"type": "object", "properties": {
        "access": {"type": "object"},
        "verified_token": {"$ref": "#/components/schemas/VerifiedToken"}}},
    "TokenInfo": {"type": "object", "properties": {
        "token_id": STR, "apps": {"type": "array", "items": STR}, "org_slug": STR,
        "organization": STR, "restricted_to_machine": STR, "source_machine_id": STR,
        "user": STR}},
    "CurrentTokenResponse": {"type": "object", "properties": {"tokens": {
        "type": "array", "items": {"$ref": "#/components/schemas/TokenInfo"}}}},
    "MachineList": {"type": "array", "items": {"$ref": "#/components/schemas/Machine"}},
    "App": {"type": "object", "properties": {
        "id": STR, "name": STR, "status": STR, "network": STR, "machine_count": _INT,
        "volume_count": _INT, "organization": {"type": "object", "properties": {
            "name": STR, "slug": STR}}}},
    "ListAppsResponse": {"type": "object", "properties": {
        "total_apps": _INT, "apps": {"type": "array", "items": {
            "$ref": "#/components/schemas/App"}}}},
    "Volume": {"type": "object", "properties": {
        "id": STR, "name": STR, "state": STR, "size_gb": _INT, "region": STR,
        "zone": STR, "encrypted": _BOOL, "attached_machine_id": STR, "created_at": STR}},
    "TokenResponse": {"type": "object", "properties": {"token": STR}},
    "ClusterInfo": {"type": "object", "properties": {
        "image_registry": {"type": "string", "nullable": True},
        "image_registry_ca": {"type": "string", "nullable": True},
        "image_registries": {"type": "array", "items": STR}}},
    "IPAssignment": {"type": "object", "properties": {
        "ip": STR, "region": STR, "service_name": STR, "shared": _BOOL, "created_at": STR}},
    "listIPAssignmentsResponse": {"type": "object", "properties": {"ips": {
        "type": "array", "items": {"$ref": "#/components/schemas/IPAssignment"}}}},
    "OrgMachine": {"type": "object", "properties": {
        "id": STR, "name": STR, "app_name": STR, "state": STR, "region": STR,
        "instance_id": STR, "version": STR, "private_ip": STR, "created_at": STR,
        "updated_at": STR, "config": {"type": "object", "properties": {
            "image": STR, "guest": {"type": "object"}, "metadata": {"type": "object"}}}}},
    "OrgMachinesResponse": {"type": "object", "properties": {
        "machines": {"type": "array", "items": {"$ref": "#/components/schemas/OrgMachine"}},
        "last_machine_id": STR, "last_updated_at": STR, "next_cursor": STR,
        "error_regions": {"type": "array", "items": STR}}},
    "OrgVolume": {"type": "object", "properties": {
        "id": STR, "name": STR, "app_name": STR, "state": STR, "size_gb": _INT, "region": STR,
        "zone": STR, "encrypted": _BOOL, "attached_machine_id": STR, "created_at": STR,
        "updated_at": STR, "fstype": STR, "snapshot_retention": _INT,
        "auto_backup_enabled": _BOOL, "host_status": STR}},
    "OrgVolumesResponse": {"type": "object", "properties": {
        "volumes": {"type": "array", "items": {"$ref": "#/components/schemas/OrgVolume"}},
        "last_volume_id": STR, "last_updated_at": STR, "next_cursor": STR}},
    "Ok": {"type": "object", "properties": {"ok": _BOOL}},
    "StartResponse": {"type": "object", "properties": {
        "previous_state": STR, "migrated": _BOOL, "new_host": STR}},
    "ExecResponse": {"type": "object", "properties": {
        "exit_code": _INT, "exit_signal": _INT, "stdout": STR, "stderr": STR}},
    "MemoryResponse": {"type": "object", "properties": {"limit_mb": _INT, "available_mb": _INT}},
    "ReclaimMemoryResponse": {"type": "object", "properties": {"actual_mb": _INT}},
    "VolumeSnapshot": {"type": "object", "properties": {
        "id": STR, "created_at": STR, "digest": STR, "retention_days": _INT, "size": _INT,
        "status": STR, "volume_size": _INT}},
    "WaitResponse": {"type": "object", "properties": {
        "ok": _BOOL, "state": STR, "version": STR, "event_id": STR}},
    "LeaseEnvelope": {"type": "object", "properties": {"status": STR, "data": {
        "type": "object", "properties": {"nonce": STR, "expires_at": _INT, "owner": STR,
                                         "description": STR, "version": STR}}}},
}
