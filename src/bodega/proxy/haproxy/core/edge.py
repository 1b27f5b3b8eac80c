"""The TLS edge in HAProxy's terms: certificates by SNI, host aliases and force_https. Pure.

HAProxy's TLS listener reads a crt-list: the default certificate first (what a
client gets when no SNI matches: ``*.localhost`` from the cluster CA on a
local cluster), then one line per hostname with a certificate, filtered by
that SNI. Certificates come and go through the runtime API, never a reload:

    added:    new ssl cert F; set ssl cert F <<PEM; commit ssl cert F;
              add ssl crt-list L <<"F hostname"
    renewed:  set ssl cert F <<PEM; commit ssl cert F      (swapped under open connections)
    removed:  del ssl crt-list L F; del ssl cert F

Three maps beside ``hosts.map``: ``aliases.map`` sends a certificate's
hostname to its app's ``<app>.<base-domain>`` (so ``www.example.com`` reaches
``hello``), ``https.map`` names the apps whose service asks for
``force_https`` (a plain HTTP request gets a 301 to the TLS port), and
``statics.map`` holds ``<app>.<base-domain><url_prefix>`` for every static
prefix of an app: a ``GET`` or ``HEAD`` whose host and path begin so goes to the
activator, which answers it from a worker holding the app's image
(``proxy/statics.py``) without waking a machine. A path merely beginning with
a prefix's characters (``/statics`` for ``/static``) goes there too; the
activator, finding no static that holds it, sends it on to a machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    """One certificate the edge serves: for ``hostname``, of ``app``."""

    hostname: str
    app: str
    fingerprint: str
    pem: str  # the key, then the chain


@dataclass(frozen=True)
class Step:
    """One runtime-API command; ``payload`` goes after ``<<`` (certificates, crt-list lines)."""

    command: str
    payload: str | None = None


def cert_file(certs_dir: str, hostname: str) -> str:
    """Where a hostname's certificate is kept (a wildcard's ``*`` is not a file name)."""
    return f"{certs_dir}/{hostname.replace('*', '_wildcard_')}.pem"


def crt_list_line(certs_dir: str, hostname: str) -> str:
    return f"{cert_file(certs_dir, hostname)} {hostname}"


def render_crt_list(default_cert: str, sites: Mapping[str, Site], certs_dir: str) -> str:
    return "".join([f"{default_cert}\n",
                    *(crt_list_line(certs_dir, h) + "\n" for h in sorted(sites))])


def cert_steps(loaded: Mapping[str, str], wanted: Mapping[str, Site], crt_list: str,
               certs_dir: str) -> list[Step]:
    """From the certificates HAProxy holds (hostname -> fingerprint) to ``wanted``."""
    steps: list[Step] = []
    for hostname in sorted(set(loaded) - set(wanted)):
        path = cert_file(certs_dir, hostname)
        steps += [Step(f"del ssl crt-list {crt_list} {path}"), Step(f"del ssl cert {path}")]
    for hostname, site in sorted(wanted.items()):
        path = cert_file(certs_dir, hostname)
        if loaded.get(hostname) == site.fingerprint:
            continue
        swap = [Step(f"set ssl cert {path}", site.pem), Step(f"commit ssl cert {path}")]
        if hostname in loaded:
            steps += swap
        else:
            steps += [Step(f"new ssl cert {path}"), *swap,
                      Step(f"add ssl crt-list {crt_list}", crt_list_line(certs_dir, hostname))]
    return steps


def map_steps(path: str, loaded: Mapping[str, str], wanted: Mapping[str, str]) -> list[Step]:
    """From a map's entries HAProxy holds to ``wanted``."""
    steps = [Step(f"del map {path} {key}") for key in sorted(set(loaded) - set(wanted))]
    for key, value in sorted(wanted.items()):
        if key not in loaded:
            steps.append(Step(f"add map {path} {key} {value}"))
        elif loaded[key] != value:
            steps.append(Step(f"set map {path} {key} {value}"))
    return steps


def render_map(entries: Mapping[str, str]) -> str:
    return "".join(f"{key} {value}\n" for key, value in sorted(entries.items()))


def static_prefixes(prefixes: Mapping[str, frozenset[str]],
                    app_host: Mapping[str, str]) -> dict[str, str]:
    """``<app>.<base-domain><url_prefix>`` -> the app, for ``statics.map`` (a prefix's
    trailing ``/`` left off, so the prefix itself is held too)."""
    return {app_host[app] + prefix.rstrip("/"): app for app, held in prefixes.items()
            if app in app_host for prefix in held}


def aliases(sites: Mapping[str, Site], app_host: Mapping[str, str]) -> dict[str, str]:
    """hostname -> ``<app>.<base-domain>`` for every certificate's hostname but wildcards
    (a wildcard serves TLS; its names are not routed to one app)."""
    return {h: app_host[s.app] for h, s in sites.items()
            if not h.startswith("*.") and s.app in app_host and h != app_host[s.app]}
