"""docs/multi-host.md, run as written: three hosts, `bodega up --advertise` and `bodega join`.

Each host is a network namespace with its own address and data dir (the
chaos suite's ``netns_kit``). Host 1 runs ``bodega up --advertise``; hosts 2
and 3 run the join line it printed, for regions syd and lon. Everything after
is the CLI a user types: members with their certificates' expiry; an app
deployed and scaled to one machine per region, served through host 1's proxy
by machines on all three hosts; a joined host's worker killed with SIGKILL
comes back with its machine and its certificate; a joined host restarted
needs no token and keeps its names; an expired token, a revoked one and one
pinning another CA are refused, and nothing is written for them.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from bodega.cluster.joined import member_tls
from bodega.runtime.tls.core.identity import identity_of
from bodega.runtime.tls.files import TlsDir
from tests.cluster.deploy_kit import app_dir, readable_dir
from tests.cluster.multihost_kit import (
    CERT_LIFETIME,
    Host,
    MultiHost,
    three_hosts,
    until,
    wait_for,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

REGIONS = {1: "ams", 2: "syd", 3: "lon"}
WORKERS = {2: 1, 3: 2}  # workers each joined host runs


@pytest.fixture(scope="module")
def cluster() -> Iterator[MultiHost]:
    with readable_dir() as root, three_hosts(root) as multi:
        joined = [multi.start(i, *multi.join_argv(REGIONS[i]), "--cpus", "4",
                              "--memory-mb", "2048", "--driver", "process",
                              "--workers", str(WORKERS[i])) for i in (2, 3)]
        for host in joined:
            wait_for(host, "bodega joined")
        until(lambda: sum(1 for s in multi.alive().values() if s == "alive") >= 10,
              "four workers, three brokers and three proxies alive")
        yield multi


def test_every_host_is_a_member_with_its_region_and_certificate_expiry(
        cluster: MultiHost) -> None:
    workers = cluster.json("cluster", "workers")
    assert sorted(w["region"] for w in workers) == ["ams", "lon", "lon", "syd"]
    subnets = [w["subnet"] for w in workers]
    assert len(set(subnets)) == 4  # each worker's machines have a /24 of their own
    table = cluster.ok("cluster", "members")
    assert "CERT EXPIRES" in table.splitlines()[0]
    for member in cluster.json("cluster", "members"):
        assert member["status"] == "alive", member
        assert member["meta"].get("cert_expires"), member  # every one holds a certificate
    joined = [h for h in cluster.members if h.index in (2, 3)]
    for host in joined:  # keys were made on the host, and only a CSR left it
        keys = list((host.data / "workers").glob("*/tls/identity.pem"))
        assert len(keys) == WORKERS[host.index]
        assert all(k.stat().st_mode & 0o077 == 0 for k in keys)
        assert (host.data / "gossip-keyring").stat().st_mode & 0o077 == 0


def proxied(cluster: MultiHost, app: str, machines: Iterable[str]) -> set[str]:
    """The machines that answered through host 1's proxy, each asked for by id (a request
    that names none goes to host 1's own region's machine)."""
    seen = set()
    with httpx.Client(timeout=10) as web:
        for machine in machines:
            try:
                answer = web.get(cluster.proxy, headers={"host": f"{app}.localhost",
                                                         "fly-force-instance-id": machine})
            except httpx.HTTPError:
                continue
            if answer.status_code == 200 and "(" in answer.text:
                seen.add(answer.text.rsplit("(", 1)[1].split(")")[0])
    return seen


def test_a_deploy_spreads_over_the_hosts_and_a_killed_worker_keeps_its_machine(
        cluster: MultiHost) -> None:
    toml = app_dir(cluster.root, "hello", "spread")
    cluster.ok("deploy", "-c", str(toml))
    cluster.ok("scale", "count", "1", "--app", "spread", "--region", "ams,syd,lon")
    machines = until(lambda: (m := cluster.json("machine", "list", "--app", "spread"))
                     and len([x for x in m if x["state"] == "started"]) == 3 and m,
                     "three machines started")
    by_region = {m["region"]: m["id"] for m in machines}
    assert set(by_region) == {"ams", "syd", "lon"}
    # Host 1's proxy reaches the machines on hosts 2 and 3 too (routed to their subnets).
    until(lambda: proxied(cluster, "spread", by_region.values()) == set(by_region.values()),
          "every host's machine answering through the proxy")
    # What host 1's banner says answers, does: its curl line, the app named.
    first = next(h for h in cluster.members if h.index == 1)
    (said,) = [line for line in first.output().splitlines() if "Proxy: http://" in line]
    curl = said.split("(curl ", 1)[1].rstrip(")").replace("<app>", "spread")
    answered = subprocess.run(["curl", "-s", "--max-time", "10", *shlex.split(curl)],
                              capture_output=True, text=True, check=False)
    assert "hello from bodega" in answered.stdout, (said, answered.stderr)

    syd = next(h for h in cluster.members if h.index == 2)
    name, pid = next(iter(syd.worker_pids().items()))
    before = certificate(syd)
    os.kill(pid, signal.SIGKILL)
    until(lambda: (now := syd.worker_pids().get(name)) and now != pid, "the worker restarted")
    until(lambda: cluster.alive().get(name) == "alive", "the restarted worker alive")
    after = {m["id"]: m for m in cluster.json("machine", "list", "--app", "spread")}
    assert after[by_region["syd"]]["state"] == "started"  # re-adopted, not made again
    assert same_identity(certificate(syd), before)  # the one it was given at the join
    until(lambda: by_region["syd"] in proxied(cluster, "spread", [by_region["syd"]]),
          "syd's machine serving")


def refused(cluster: MultiHost, token: str, data: Path) -> str:
    # A worker-only host: host 3's broker and proxy hold its ports already.
    done = cluster.run_on(3, "join", cluster.join_argv("lon")[1], "--token", token,
                          "--region", "lon", "--data-dir", str(data), "--no-broker",
                          "--no-proxy")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: "), done.stderr
    assert not data.exists()  # nothing kept for a refused join, not even its lock file
    return lines[0]


def test_an_expired_a_revoked_and_a_foreign_token_cannot_join(cluster: MultiHost) -> None:
    short = cluster.ok("cluster", "token", "create", "--ttl", "1s").strip()
    revoked = cluster.ok("cluster", "token", "create", "--description", "to revoke").strip()
    revoked_id = revoked.split("::")[1].split(".")[0]
    assert "revoked" in cluster.ok("cluster", "token", "revoke", revoked_id)
    until(lambda: {t["id"]: t["status"] for t in cluster.json("cluster", "token", "list")}
          .get(short.split("::")[1].split(".")[0]) == "expired", "the short token expired")
    assert "expired at" in refused(cluster, short, cluster.root / "late")
    assert "was revoked" in refused(cluster, revoked, cluster.root / "revoked")
    good = cluster.join_argv("lon")[3]
    foreign = "K10" + "0" * 64 + good[67:]
    assert "nothing was sent" in refused(cluster, foreign, cluster.root / "foreign")
    listed = {t["id"]: t for t in cluster.json("cluster", "token", "list")}
    assert listed[revoked_id]["status"] == "revoked"
    assert listed[revoked_id]["joins"] == 0


def test_a_joined_host_restarted_comes_back_with_its_identity_and_no_token(
        cluster: MultiHost) -> None:
    lon = next(h for h in cluster.members if h.index == 3)
    names = set(lon.worker_pids())
    before = certificate(lon)
    started = time.monotonic()
    cluster.stop(lon)
    took = time.monotonic() - started
    assert lon.process is not None
    assert lon.process.returncode == 0, lon.output()[-2000:]
    # No server of the host waited out its grace: host 1's metrics store keeps an idle
    # connection to each (its scrapes), which held each for 5 s, one after another (the
    # stop took about 17 s; now about 3).
    logs = "".join(f.read_text(errors="replace") for f in (lon.data / "logs").glob("*.log"))
    assert "after the 5 s grace" not in logs
    assert took < 10, took
    again = cluster.start(3, "join", cluster.join_argv("lon")[1])  # no token, no region
    out = wait_for(again, "bodega joined")
    assert "no token needed" in out
    assert set(again.worker_pids()) == names
    assert same_identity(certificate(lon), before)
    until(lambda: all(cluster.alive().get(n) == "alive" for n in names), "lon alive again")


def test_join_refuses_a_second_run_on_its_data_dir_in_one_line(cluster: MultiHost) -> None:
    done: subprocess.CompletedProcess[str] = cluster.run_on(
        2, "join", cluster.join_argv("syd")[1], "--data-dir",
        str(next(h for h in cluster.members if h.index == 2).data))
    assert done.returncode == 1
    assert "bodega join is already running on" in done.stderr


def test_the_join_listener_speaks_tls_only_and_answers_errors_in_shape(
        cluster: MultiHost) -> None:
    where = cluster.join_argv("syd")[1]
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{where}/v1/join/ca", timeout=10)  # plain HTTP on the TLS port
    with httpx.Client(base_url=f"https://{where}", verify=False, timeout=10) as host:
        unknown = host.get("/v1/machines")
        assert unknown.status_code == 404
        assert set(unknown.json()) >= {"error", "status"}
        malformed = host.post("/v1/join", json={"token": "K10nope", "region": "syd",
                                                "workers": [{"name": "syd-x-1", "csr": "x"}]})
        assert malformed.status_code == 400
        assert "not a join token" in malformed.json()["error"]


def test_joined_hosts_renew_their_certificates_through_the_signer_with_no_restart(
        cluster: MultiHost) -> None:
    """Last: by now every first certificate is near the two thirds of its life. The host's
    worker, registry agent, broker and proxy each renew their own."""
    syd = next(h for h in cluster.members if h.index == 2)
    pids = {c["name"]: (c["role"], int(c["pid"])) for c in syd.components()}
    assert sorted(role for role, _ in pids.values()) == ["agent", "broker", "proxy", "worker"]
    firsts = {name: certificate(syd, role) for name, (role, _) in pids.items()}

    def shown(name: str) -> datetime.datetime | None:
        meta = {m["name"]: m["meta"] for m in cluster.json("cluster", "members")}[name]
        return datetime.datetime.fromisoformat(str(meta["cert_expires"]))

    for name, (role, pid) in pids.items():
        first = firsts[name]

        def later(r: str = role, f: x509.Certificate = first) -> x509.Certificate | None:
            now = certificate(syd, r)
            return now if now.not_valid_after_utc > f.not_valid_after_utc else None

        renewed = until(later, f"{name} renewed its certificate", timeout=CERT_LIFETIME)
        assert same_identity(renewed, first)
        assert renewed.public_key() != first.public_key()  # a new key, made on the host
        def published(n: str = name, r: x509.Certificate = renewed) -> bool:
            seen = shown(n)
            return seen is not None and seen >= r.not_valid_after_utc.replace(microsecond=0)

        until(published, f"the members list showing {name}'s new expiry")
        assert {c["name"]: int(c["pid"]) for c in syd.components()}[name] == pid  # no restart
        assert cluster.alive()[name] == "alive"


def certificate(host: Host, role: str = "worker") -> x509.Certificate:
    """The certificate the host's (first) worker, or its agent, broker or proxy, holds now."""
    tls = member_tls(host.data, role) if role != "worker" else next((host.data / "workers").glob(
        "*/tls"))
    return TlsDir(tls).read_identity()[1]


def same_identity(cert: x509.Certificate, before: x509.Certificate) -> bool:
    """The same worker of the same cluster, from the same CA (the key may be a renewal's)."""
    return identity_of(cert) == identity_of(before) and cert.issuer == before.issuer


def test_hosts_without_cgroups_say_so_and_image_machines_are_told_why_nothing_fits(
        cluster: MultiHost) -> None:
    """``ip netns exec`` hides the cgroup hierarchies: each host's supervisor prints the one
    line its workers said of it, and an image machine asked of a region whose workers run
    the process driver only is refused naming why, not failed at start."""
    for host in cluster.members[:3]:
        said = wait_for(host, "no cgroup hierarchy is mounted at /sys/fs/cgroup")
        lines = [line for line in said.splitlines() if "no cgroup hierarchy" in line]
        # One line a worker (host 3 runs two; a restarted host says it again).
        assert len(lines) >= 1
        assert all("WARNING" in line and "machines get no cpu limit" in line for line in lines)
    cluster.ok("apps", "create", "pictures")
    ran = cluster.bodega("machine", "run", "-a", "pictures", "--region", "syd",
                         "--image", "127.0.0.1:5000/pictures:1", "--", "true")
    assert ran.returncode == 1, ran.stdout
    assert "1 no image driver" in ran.stderr, ran.stderr
    assert "an image machine needs a worker that runs images" in ran.stderr
    placed = cluster.json("machine", "place", "--app", "pictures", "--region", "syd",
                          "--image", "127.0.0.1:5000/pictures:1", "--explain")
    assert "runs no images: the worker runs the process driver only" in json.dumps(placed)
