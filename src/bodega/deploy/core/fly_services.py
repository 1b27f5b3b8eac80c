"""How a fly.toml app is reached: its services, their ports, concurrency and checks.

``[http_service]``, ``[[services]]`` (ports, ``tcp_checks``, ``http_checks``) and the
top-level ``[checks]``, as ``deploy/core/config.py`` reads them and ``machine_spec`` turns
them into the Machines API's services and checks. Also the two things every section's
model shares: a strict, frozen base and the Go-duration check.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bodega.model.duration import parse_duration
from bodega.model.machine_config import Check


def duration(value: str | None) -> str | None:
    """A Go duration as fly.toml writes them (``60s``, ``1m30s``, ``500ms``)."""
    if value is not None:
        try:
            parse_duration(value, 0.0)
        except ValueError:
            raise ValueError(f"not a duration {value!r} (use e.g. 60s, 1m30s)") from None
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TomlCheck(Strict):
    type: Literal["tcp", "http"] = "tcp"
    port: int | None = Field(default=None, ge=1, le=65535)
    path: str | None = None
    method: str | None = None
    protocol: str | None = None
    headers: dict[str, str] | None = None
    tls_skip_verify: bool | None = None
    tls_server_name: str | None = None
    kind: Literal["informational", "readiness"] | None = None
    interval: str | None = None
    timeout: str | None = None
    grace_period: str | None = None
    processes: list[str] | None = None

    _durations = field_validator("interval", "timeout", "grace_period")(duration)

    def check(self, port: int | None = None) -> Check:
        """The check as the Machines API takes it; ``port``: the service's, when the check
        names none."""
        fields = self.model_dump(exclude_none=True, exclude={"processes", "headers"})
        if self.headers:  # fly.toml writes a map; the Machines API takes [{name, values}]
            fields["headers"] = [{"name": k, "values": [v]} for k, v in self.headers.items()]
        if self.port is None and port is not None:
            fields["port"] = port
        return Check.model_validate(fields)


class Concurrency(Strict):
    type: Literal["connections", "requests"] = "connections"
    soft_limit: int | None = Field(default=None, ge=1)
    hard_limit: int | None = Field(default=None, ge=1)


# pg_tls: passed through as raw TCP, so the database answers its SSL request itself.
Handler = Literal["http", "tls", "proxy_proto", "pg_tls"]  # none at all: raw TCP passed through


class ProxyProtoOptions(Strict):
    version: Literal["v1", "v2"] = "v1"


class TlsOptions(Strict):
    alpn: list[str] | None = None
    versions: list[Literal["TLSv1.2", "TLSv1.3"]] | None = None
    default_self_signed: bool | None = None


class HttpResponseOptions(Strict):
    headers: dict[str, str | bool | list[str]] | None = None
    pristine: bool | None = None


class HttpOptions(Strict):
    compress: bool | None = None
    h2_backend: bool | None = None  # gRPC: HTTP/2 to the machine
    idle_timeout: int | None = Field(default=None, ge=1)
    headers_read_timeout: int | None = Field(default=None, ge=1)
    response: HttpResponseOptions | None = None


class HttpService(Strict):
    internal_port: int = Field(ge=1, le=65535)
    force_https: bool = False
    auto_stop_machines: bool | Literal["off", "stop", "suspend"] = "off"
    auto_start_machines: bool = True
    min_machines_running: int = Field(default=0, ge=0)
    processes: list[str] | None = None
    concurrency: Concurrency | None = None
    tls_options: TlsOptions | None = None
    http_options: HttpOptions | None = None
    checks: list[TomlCheck] = []


class ServicePort(Strict):
    """One public port (or a range, ``start_port``..``end_port``) and how the edge handles it."""

    port: int | None = Field(default=None, ge=1, le=65535)
    start_port: int | None = Field(default=None, ge=1, le=65535)
    end_port: int | None = Field(default=None, ge=1, le=65535)
    handlers: list[Handler] = []
    force_https: bool | None = None
    proxy_proto_options: ProxyProtoOptions | None = None
    tls_options: TlsOptions | None = None
    http_options: HttpOptions | None = None

    @model_validator(mode="after")
    def _one_port_or_a_range(self) -> ServicePort:
        if (self.port is None) == (self.start_port is None):
            raise ValueError("give port, or start_port and end_port (not both)")
        if self.start_port is not None and (self.end_port is None
                                            or self.end_port < self.start_port):
            raise ValueError("end_port must be given, and at least start_port")
        if self.port is not None and self.end_port is not None:
            raise ValueError("end_port goes with start_port, not port")
        if self.proxy_proto_options is not None and "proxy_proto" not in self.handlers:
            raise ValueError("proxy_proto_options needs the proxy_proto handler")
        return self


class Service(Strict):
    protocol: Literal["tcp", "udp"] = "tcp"
    internal_port: int = Field(ge=1, le=65535)
    ports: list[ServicePort] = []
    processes: list[str] | None = None
    auto_stop_machines: bool | Literal["off", "stop", "suspend"] = "off"
    auto_start_machines: bool = True
    min_machines_running: int = Field(default=0, ge=0)
    concurrency: Concurrency | None = None
    tcp_checks: list[TomlCheck] = []
    http_checks: list[TomlCheck] = []
