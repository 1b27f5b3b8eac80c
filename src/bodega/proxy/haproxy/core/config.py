"""HAProxy's configuration, rendered from a layout. Pure functions.

    frontend public (HTTP, and TLS by SNI from certs.list when it has a TLS port)
      Host ─▶ aliases.map (a certificate's hostname ─▶ <app>.<domain>) ─▶ https.map
      (force_https: 301) ─▶ hosts.map ─▶ backend pool_<n> (the app's near machines:
                          │              │  leastconn over slots)
                          │              │ every near machine at its hard limit, a far one not
                          │              └──▶ backend far_<n> (its other machines)
                          │ no such host       │ every slot empty or down
                          │ a GET under a      │
                          │ static prefix      │
                          ▼ (statics.map)      ▼
                     backend activator ◀── server activator (backup)

The activator is bodega's Python proxy on a loopback port: it answers
unknown hosts (404), starts a machine for an app with none running, and
forwards the request once the machine's port accepts; it also answers a
request for an app's statics from a worker holding its image. fly-proxy's
rules map onto HAProxy's own features: ``hard_limit`` is a server's ``maxconn`` (the
rest queue in the backend, ``timeout queue``); the nearest region first is two
backends per app, the far one taken only while the near one is full
(``layout.spill_condition``); a connect that failed or was not answered within
``CONNECT_TIMEOUT`` is retried on another machine (``retry-on conn-failure``
with ``option redispatch``: nothing was sent, so any method is safe to
retry); a machine's idle connections take any client's requests
(``http-reuse always``), and a client's first request an idle connection was
closed under is sent again when its method allows (``IDEMPOTENT``; a later one
ends the client's connection instead, as a keep-alive's end does: ``KEPT``);
X-Forwarded-For/Proto/Port, Fly-Client-IP, Fly-Region and
a request id (``fly-request-id``/``x-request-id``, kept when the client sent
one) are set on every request. A machine that refuses a connect is marked down
at once (``WATCH``), so a request sent the moment after a stop, before the view
has heard of it, is retried on the activator, which starts the machine again.
WebSocket upgrades and streamed bodies pass as they are. TCP services have
sections of their own (``tcp_layout.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bodega.proxy.core.routes import ACK_TIMEOUT, CONNECT_TIMEOUT
from bodega.proxy.haproxy.core.layout import (
    Layout,
    Slots,
    backend_name,
    far_name,
    host_key,
    server_name,
    spill_condition,
)
from bodega.proxy.haproxy.core.replay_action import MAX_BODY

ACTIVATOR = "activator"
# Methods a request may be sent again with after a machine closed a reused connection under it
# with no answer (RFC 9110's idempotent ones; HAProxy's METH_GET is GET and HEAD).
IDEMPOTENT = "METH_GET or METH_OPTIONS or METH_PUT or METH_DELETE or METH_TRACE"
# Set once a client's connection has carried a request. A request that may be sent again is
# copied aside first, and that copy cost about 7 % of the requests HAProxy serves a second
# (docs/benchmarks.md). A later HTTP/1 request on the same connection goes without: when a
# machine closes a reused connection under it, HAProxy closes the client's connection with
# no answer, as a server does whose keep-alive ends as a request comes (RFC 9112, 9.3.1).
# A client that retries then (browsers, curl, Go) sends it again; one that does not gets
# an error, as it would from the machine itself. HAProxy's default reuse (``safe``) treats
# every request it reuses a connection for so. A first request has no such way out, so it
# keeps its copy. (An HTTP/2 stream is never a first to HAProxy: one a machine closed under
# is refused with REFUSED_STREAM, whatever this says, and the client may send it again.)
KEPT = "sess.kept"
TLS13_SUITES = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
# Every machine's slot. Two connects in a row it refuses or leaves unanswered mark it down
# (``observe layer4``, ``error-limit 2``), so the retry of such a request (``retry-on
# conn-failure``, ``option redispatch``) goes to another machine, or to the activator once
# none is up, instead of to the same dead address (a machine stopped a gossip round before
# the view says so, a host that stopped answering). One is not enough: a burst that
# overflows a machine's accept queue drops a SYN too, and would take a healthy machine out
# (every near one at once, its app's traffic then all through the activator); the first
# failure's request is redispatched anyway, and a connect that succeeds clears the count.
# Two is the most ``retries 2`` allows: with one machine in the backend, its second failed
# connect marks it down and the last retry goes to the activator. Active checks only bring
# a slot marked down back (every second); one that is up is checked once a minute. The first
# check after a mark-down comes a second later (``fastinter``): without it HAProxy leaves
# that check where the minute's schedule had put it, and a machine whose host answered again
# after a few seconds got no request for up to a minute. A slot
# the layout (re)readies is up at once. ``tcp-ut``: a connection whose host stops
# answering is given up once what HAProxy sent on it goes unacknowledged for
# ``ACK_TIMEOUT`` (a request on a connection kept from before: ``retry-on
# empty-response`` sends it to another machine when it may be sent twice).
WATCH = ("check inter 60s fastinter 1s downinter 1s rise 1 fall 1 "
         "observe layer4 error-limit 2 on-error mark-down "
         f"tcp-ut {round(ACK_TIMEOUT * 1000)}ms")


@dataclass(frozen=True)
class HaproxySettings:
    bind_host: str
    bind_port: int
    activator_host: str
    activator_port: int
    socket_path: Path
    hosts_map: Path
    base_domain: str = "localhost"
    threads: int = 1
    maxconn: int | None = None  # None: HAProxy derives it from the open-files limit
    # A reload leaves the old process serving its open connections (streams, WebSockets) for
    # at most this long.
    hard_stop_after: str = "60s"
    region: str = ""  # told to machines as Fly-Region
    tls_host: str = ""
    tls_port: int = 0  # 0: no TLS listener
    default_cert: Path | None = None  # key + chain: what a client gets when no SNI matches
    connect_timeout: float = CONNECT_TIMEOUT  # seconds

    @property
    def aliases_map(self) -> Path:
        return self.hosts_map.with_name("aliases.map")

    @property
    def https_map(self) -> Path:
        return self.hosts_map.with_name("https.map")

    @property
    def statics_map(self) -> Path:
        return self.hosts_map.with_name("statics.map")

    @property
    def replay_lua(self) -> Path:
        return self.hosts_map.with_name("replay.lua")

    @property
    def crt_list(self) -> Path:
        return self.hosts_map.with_name("certs.list")

    @property
    def certs_dir(self) -> Path:
        return self.hosts_map.with_name("certs")


def render(layout: Layout, settings: HaproxySettings) -> str:
    s = settings
    lines = [
        "# Written by bodega proxy: edits are lost at the next change of shape.",
        "global",
        f"    stats socket {s.socket_path} mode 600 level admin expose-fd listeners",
        "    stats timeout 10s",
        *([f"    maxconn {s.maxconn}"] if s.maxconn else []),
        f"    nbthread {s.threads}",
        f"    hard-stop-after {s.hard_stop_after}",
        f"    lua-load {s.replay_lua}",
        # TLS sessions resume by ticket (in TLS 1.3 the only way), as nginx's default does;
        # a session cache would cost every handshake a copy into it (and a reload empties it).
        "    tune.ssl.cachesize 0",
        # TLS 1.3's suites, chosen by this order (HAProxy's, the server's), not the client's:
        # AES-128-GCM before AES-256-GCM, which OpenSSL and most clients offer first, took
        # about 4 % more new connections a second here. The list is Mozilla's intermediate
        # one; Mozilla lets the client choose, so a client without AES instructions that
        # prefers ChaCha20 gets AES-128-GCM here (it got AES-256-GCM before).
        f"    ssl-default-bind-ciphersuites {TLS13_SUITES}",
        "",
        "defaults",
        "    mode http",
        # A machine whose host stopped answering (its link down, say) drops the SYN: the
        # connect gives up after this and is retried on another machine (``retries``),
        # and the server is marked down (``WATCH``). A check of a server marked down
        # gives up as soon, so a host back on the network is seen within ``downinter``.
        f"    timeout connect {_ms(s.connect_timeout)}",
        f"    timeout check {_ms(s.connect_timeout)}",
        "    timeout client 60s",
        "    timeout server 300s",
        "    timeout http-keep-alive 60s",
        "    timeout http-request 30s",
        "    timeout queue 30s",
        "    timeout tunnel 1h",
        "    option http-keep-alive",
        # At a reload the old process would close idle keep-alive connections at once, and
        # a request a client sent on one at that instant would get no answer at all. This
        # keeps them until their next request, answered with "Connection: close".
        "    option idle-close-on-response",
        # A new client's first request may go on a machine's idle connection, as nginx's
        # upstream keep-alive does: with clients that open a connection per request (TLS
        # ones most of all) the machine is not made to accept one per request too.
        "    http-reuse always",
        "    retries 2",
        "    option redispatch 1",
        # A connect that failed or timed out is retried, on another machine (nothing was
        # sent: safe for any method, as on the Python data plane). So is a client's first
        # request a machine closed an idle connection under with no answer (its keep-alive
        # ended as the request came), but only for a method that may be sent twice: anything
        # else gets a 502, as nginx does (``IDEMPOTENT``). Later requests on the client's
        # connection are not kept (``KEPT``). A request sent whose answer is slow to come is
        # never sent again (no ``response-timeout``): the machine may be acting on it.
        "    retry-on conn-failure empty-response",
        "",
        "frontend public",
        f"    bind {_address(s.bind_host, s.bind_port)}",
        *_tls_bind(s),
        "    unique-id-format %{+X}o%Ts%rt%pid",
        "    option forwardfor",
        "    option http-buffer-request",  # a body that fits is kept for a fly-replay
        "    http-request del-header x-bodega-replay",  # only HAProxy's Lua action sends it
        f"    http-request disable-l7-retry unless {IDEMPOTENT}",
        f"    http-request disable-l7-retry if {{ var({KEPT}) -m found }}",
        f"    http-request set-var({KEPT}) bool(true)",
        # The site a request is for: its Host, or the app a certificate's hostname belongs to.
        "    http-request set-var(txn.site) req.hdr(host),field(1,:),lower",
        f"    http-request set-var(txn.site) var(txn.site),map({s.aliases_map}) "
        f"if {{ var(txn.site),map({s.aliases_map}) -m found }}",
        *_force_https(s),
        "    http-request set-var(txn.rid) req.hdr(x-request-id) "
        "if { req.hdr(x-request-id) -m found }",
        "    http-request set-var(txn.rid) req.hdr(fly-request-id) "
        "if { req.hdr(fly-request-id) -m found }",
        "    http-request set-var(txn.rid) unique-id unless { var(txn.rid) -m found }",
        "    http-request set-header fly-request-id %[var(txn.rid)]",
        "    http-request set-header x-request-id %[var(txn.rid)]",
        "    http-request set-header x-forwarded-proto https if { ssl_fc }",
        "    http-request set-header x-forwarded-proto http unless { ssl_fc }",
        "    http-request set-header x-forwarded-port %[dst_port]",
        "    http-request set-header fly-client-ip %[src]",
        *([f"    http-request set-header fly-region {s.region}"] if s.region else []),
        *_replay(),
        "    http-response set-header fly-request-id %[var(txn.rid)]",
        "    http-response set-header x-request-id %[var(txn.rid)]",
        # The app's backend, from the Host map. Every http-request rule runs before any
        # use_backend rule wherever it is written (HAProxy warns of one written after).
        f"    http-request set-var(txn.backend) var(txn.site),map({s.hosts_map})",
        *_statics(s),
        # A static file: bodega's proxy fetches it from a worker, whatever the machines' state.
        f"    use_backend {ACTIVATOR} if {{ var(txn.static) -m found }}",
        # One machine asked for by id, or a region: bodega's proxy picks (HAProxy 2.6 cannot
        # choose a server by a header).
        f"    use_backend {ACTIVATOR} if {{ req.hdr(fly-force-instance-id) -m found }}",
        f"    use_backend {ACTIVATOR} if {{ req.hdr(fly-prefer-region) -m found }}",
        # The app's far backend while its near one is full (HAProxy 2.6 takes a backend's
        # name in be_conn_free as written, not from a variable: one line per backend).
        *(f"    use_backend {far_name(index)} if {{ var(txn.backend) -m str "
          f"{backend_name(index)} }} {spill_condition(backend_name(index), far_name(index))}"
          for index in range(len(layout.backends))),
        "    use_backend %[var(txn.backend)] if { var(txn.backend) -m found }",
        f"    default_backend {ACTIVATOR}",
        "",
        f"backend {ACTIVATOR}",
        f"    server {ACTIVATOR} {_address(s.activator_host, s.activator_port)}",
    ]
    owners = {index: app for app, index in layout.apps.items()}
    for index, slots in enumerate(layout.backends):
        owner = owners.get(index, "free: for the next app")
        lines += ["", f"backend {backend_name(index)}", f"    # {owner}",
                  "    balance leastconn", *_servers(slots),
                  f"    server {ACTIVATOR} {_address(s.activator_host, s.activator_port)} "
                  "backup",
                  "", f"backend {far_name(index)}", f"    # {owner}: its machines elsewhere",
                  "    balance leastconn", *_servers(layout.far[index])]
    return "\n".join(lines) + "\n"


def _servers(slots: Slots) -> list[str]:
    lines = []
    for i, spec in enumerate(slots):
        if spec is None:
            lines.append(f"    server {server_name(i)} 127.0.0.1:9 disabled {WATCH}")
        else:
            limit = f" maxconn {spec.maxconn}" if spec.maxconn else ""
            lines.append(f"    server {server_name(i)} {_address(spec.host, spec.port)}"
                         f"{limit} {WATCH}")
    return lines


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def render_hosts(layout: Layout, base_domain: str) -> str:
    """The Host -> backend map: ``<app>.<base-domain>`` for each app with a backend."""
    return "".join(f"{host_key(app, base_domain)} {backend_name(index)}\n"
                   for app, index in sorted(layout.apps.items()))


def _replay() -> list[str]:
    """The request kept aside (as sent on, so last) for a fly-replay, and the action that
    replays it when a machine asks (``replay_action.py``)."""
    return ["    http-request set-var(txn.replay_method) method",
            "    http-request set-var(txn.replay_uri) pathq",
            "    http-request set-var(txn.replay_hdrs) req.hdrs",
            "    http-request set-var(txn.replay_size) req.body_size "
            "if { req.body_size -m int gt 0 }",
            f"    http-request set-var(txn.replay_body) req.body "
            f"if {{ req.body_size -m int gt 0 }} {{ req.body_size -m int le {MAX_BODY} }}",
            "    http-response lua.fly_replay if { res.hdr(fly-replay) -m found }"]


def _statics(s: HaproxySettings) -> list[str]:
    """A ``GET`` or ``HEAD`` (``METH_GET``) under one of its app's static prefixes is the
    activator's: it serves the file from the app's image, waking nothing (``edge.py``)."""
    return ["    http-request set-var(txn.path) path if METH_GET",
            f"    http-request set-var(txn.static) var(txn.site),concat(,txn.path,),"
            f"map_beg({s.statics_map}) if METH_GET"]


def _tls_bind(s: HaproxySettings) -> list[str]:
    """TLS 1.2 and 1.3, h2 or http/1.1 by ALPN, the certificate by SNI from the crt-list."""
    if not s.tls_port:
        return []
    return [f"    bind {_address(s.tls_host or s.bind_host, s.tls_port)} ssl crt-list "
            f"{s.crt_list} alpn h2,http/1.1 ssl-min-ver TLSv1.2"]


def _force_https(s: HaproxySettings) -> list[str]:
    """A plain request for an app with ``force_https`` gets a 301 to the same URL over TLS."""
    if not s.tls_port:
        return []
    port = "" if s.tls_port == 443 else f":{s.tls_port}"
    return [f"    http-request redirect location https://%[req.hdr(host),field(1,:)]{port}"
            f"%[capture.req.uri] code 301 if !{{ ssl_fc }} "
            f"{{ var(txn.site),map({s.https_map}) -m found }}"]


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
