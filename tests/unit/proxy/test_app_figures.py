"""The fly_app_* and fly_edge_* series: HAProxy's counters read, the Python plane's counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bodega.proxy.figures import AppFigures, Place, status_class
from bodega.proxy.haproxy.runtime import parse_stat

# Two slots of app web (near pool_0 and far pool_far_0), one TCP slot, an unknown server.
SHOW_STAT = """# pxname,svname,qcur,scur,stot,status,lbtot,hrsp_1xx,hrsp_2xx,hrsp_3xx,\
hrsp_4xx,hrsp_5xx,hrsp_other,rtime,ttime,req_tot
public,FRONTEND,,3,120,OPEN,,0,100,0,15,5,0,,,120
pool_0,s0,0,2,70,UP,70,0,60,0,10,0,0,12,30,
pool_0,s1,0,0,30,UP,30,0,25,0,5,0,0,40,50,
pool_0,s2,0,0,0,UP,0,0,0,0,0,0,0,0,0,
pool_0,s3,0,0,3,UP,3,0,3,0,0,0,0,0,1,
pool_0,BACKEND,0,2,100,UP,100,0,85,0,15,3,0,20,35,
pool_far_0,s0,0,1,20,UP,20,1,15,0,0,2,0,8,9,
pool_far_0,BACKEND,0,1,20,UP,20,1,15,0,0,2,0,8,9,
tcp_5432,s0,0,4,9,UP,9,0,0,0,0,0,0,0,0,
other,s9,0,7,7,UP,7,0,7,0,0,0,0,0,0,

"""

SERVERS = {("pool_0", "s0"): ("web", "m1"), ("pool_0", "s1"): ("web", "m2"),
           ("pool_0", "s2"): ("web", "m4"), ("pool_0", "s3"): ("web", "m5"),
           ("pool_far_0", "s0"): ("web", "m3")}
TCP = {("tcp_5432", "s0"): ("db", "d1")}
APPS = {"pool_0": "web", "pool_far_0": "web"}


def figures() -> AppFigures:
    places = {"m1": Place("web", "ams", "w1"), "m2": Place("web", "ams", "w2"),
              "m3": Place("web", "ord", "w3"), "d1": Place("db", "ams", "w1"),
              "m4": Place("web", "", ""), "m5": Place("web", "", ""),
              "m9": Place("shop", "", "")}
    return AppFigures(lambda: places, lambda app: "acme" if app == "web" else "personal",
                      ("ams", "proxy-1"))


def samples(collector: AppFigures) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
          **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def test_status_classes() -> None:
    assert [status_class(c) for c in (200, 204, 301, 404, 503, 101, 0, 600)] == [
        "2xx", "2xx", "3xx", "4xx", "5xx", "other", "other", "other"]


def test_haproxy_rows_become_each_machines_and_each_apps_series() -> None:
    collector = figures()
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    found = samples(collector)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "acme"}
    assert value(found, "fly_app_http_responses_count", **m1, status="2xx") == 60
    assert value(found, "fly_app_http_responses_count", **m1, status="4xx") == 10
    m3 = {"app": "web", "machine": "m3", "region": "ord", "host": "w3", "org": "acme"}
    assert value(found, "fly_app_http_responses_count", **m3, status="other") == 1  # a 1xx
    assert value(found, "fly_app_tcp_connects_count", **m1) == 70
    assert value(found, "fly_app_concurrency", **m1) == 2
    assert value(found, "fly_app_http_response_time_seconds_avg", **m1) == 0.012
    # An average once a machine has answered (under a millisecond reads 0), none before.
    m4 = {"app": "web", "machine": "m4", "region": "", "host": "", "org": "acme"}
    m5 = {**m4, "machine": "m5"}
    assert value(found, "fly_app_http_response_time_seconds_avg", **m4) is None
    assert value(found, "fly_app_http_response_time_seconds_avg", **m5) == 0
    d1 = {"app": "db", "machine": "d1", "region": "ams", "host": "w1", "org": "personal"}
    assert value(found, "fly_app_tcp_connects_count", **d1) == 9
    assert value(found, "fly_app_concurrency", **d1) == 4
    assert value(found, "fly_app_http_response_time_seconds_avg", **d1) is None  # no HTTP
    assert value(found, "fly_app_http_responses_count", **d1, status="2xx") is None
    edge = {"app": "web", "region": "ams", "host": "proxy-1", "org": "acme"}
    # The near and far backends add up; the edge's own 503s (3 + 2) are in them.
    assert value(found, "fly_edge_http_responses_count", **edge, status="2xx") == 100
    assert value(found, "fly_edge_http_responses_count", **edge, status="5xx") == 5
    assert not any(dict(labels).get("machine") == "s9" for _, labels in found)


def test_the_count_series_keep_flys_names() -> None:
    collector = figures()
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    text = generate_latest_of(collector)
    assert "# TYPE fly_app_http_responses_count untyped" in text
    assert "fly_app_http_responses_count{" in text
    assert "fly_app_http_responses_count_total" not in text


def generate_latest_of(collector: AppFigures) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_counts_carry_over_a_reload_whose_counters_start_at_zero() -> None:
    collector = figures()
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    fresh = SHOW_STAT.replace("pool_0,s0,0,2,70,UP,70,0,60,", "pool_0,s0,0,0,4,UP,4,0,3,")
    collector.observe_haproxy(parse_stat(fresh), SERVERS, APPS, 1, TCP)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "acme"}
    found = samples(collector)
    assert value(found, "fly_app_http_responses_count", **m1, status="2xx") == 63
    assert value(found, "fly_app_tcp_connects_count", **m1) == 74


def test_the_python_planes_requests_add_to_haproxys() -> None:
    collector = figures()
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    for code in (200, 200, 404):
        collector.observe_request("web", "m1", code, 0.003)
    collector.observe_request("web", None, 503, 0.001)  # no machine could take it
    found = samples(collector)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "acme"}
    assert value(found, "fly_app_http_responses_count", **m1, status="2xx") == 62
    assert value(found, "fly_app_http_responses_count", **m1, status="4xx") == 11
    edge = {"app": "web", "region": "ams", "host": "proxy-1", "org": "acme"}
    assert value(found, "fly_edge_http_responses_count", **edge, status="5xx") == 6
    assert value(found, "fly_app_http_response_time_seconds_count", **m1) == 3
    assert value(found, "fly_app_http_response_time_seconds_bucket", **m1, le="0.0025") == 0
    assert value(found, "fly_app_http_response_time_seconds_bucket", **m1, le="0.005") == 3
    assert value(found, "fly_app_http_response_time_seconds_bucket", **m1, le="+Inf") == 3


def test_a_machine_the_proxy_no_longer_knows_of_has_its_series_dropped() -> None:
    places = {"m1": Place("web", "ams", "w1"), "m2": Place("web", "ams", "w2")}
    collector = AppFigures(lambda: places, lambda app: "personal", ("ams", "proxy-1"))
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    collector.observe_request("web", "m2", 200, 0.01)
    del places["m2"]  # destroyed
    found = samples(collector)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "personal"}
    assert value(found, "fly_app_http_responses_count", **m1, status="2xx") == 60
    # Its counts are gone (its gauges go with HAProxy's next look, its slot emptied).
    assert not any(dict(labels).get("machine") == "m2" for name, labels in found
                   if name in ("fly_app_http_responses_count", "fly_app_tcp_connects_count",
                               "fly_app_http_response_time_seconds_count"))
    assert value(found, "fly_edge_http_responses_count", app="web", region="ams",
                 host="proxy-1", org="personal", status="2xx") == 101  # the app's stay


def test_the_python_planes_requests_in_flight_are_each_machines_concurrency() -> None:
    places = {"m1": Place("web", "ams", "w1"), "m2": Place("web", "ams", "w2")}
    in_flight = {"m1": 3}
    collector = AppFigures(lambda: places, lambda app: "personal", ("ams", "proxy-1"),
                           lambda: in_flight)
    found = samples(collector)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "personal"}
    assert value(found, "fly_app_concurrency", **m1) == 3
    assert value(found, "fly_app_concurrency", **{**m1, "machine": "m2", "host": "w2"}) == 0
    # Behind HAProxy, its open sessions and the activator's requests add up.
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    assert value(samples(collector), "fly_app_concurrency", **m1) == 5


def test_a_reused_slot_counts_for_its_new_machine_only_what_came_after() -> None:
    """HAProxy counts by slot, and the layout gives an emptied slot (and an app's emptied
    backend) to the next machine (app): the new one starts from what the slot held."""
    collector = figures()
    collector.observe_haproxy(parse_stat(SHOW_STAT), SERVERS, APPS, 0, TCP)
    later = SHOW_STAT.replace("pool_0,s0,0,2,70,UP,70,0,60,", "pool_0,s0,0,2,75,UP,75,0,65,")
    later = later.replace("pool_0,BACKEND,0,2,100,UP,100,0,85,",
                          "pool_0,BACKEND,0,2,105,UP,105,0,90,")
    reused = {**SERVERS, ("pool_0", "s0"): ("shop", "m9")}
    collector.observe_haproxy(parse_stat(later), reused, {"pool_0": "shop"}, 0, TCP)
    found = samples(collector)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "acme"}
    assert value(found, "fly_app_http_responses_count", **m1, status="2xx") == 60
    assert value(found, "fly_app_tcp_connects_count", **m1) == 70
    m9 = {"app": "shop", "machine": "m9", "region": "", "host": "", "org": "personal"}
    assert value(found, "fly_app_http_responses_count", **m9, status="2xx") == 5
    assert value(found, "fly_app_tcp_connects_count", **m9) == 5
    edge = {"region": "ams", "host": "proxy-1", "status": "2xx"}
    assert value(found, "fly_edge_http_responses_count", app="shop", org="personal",
                 **edge) == 5
    # web's near backend counted 85 before it went; its far backend is not shop's.
    assert value(found, "fly_edge_http_responses_count", app="web", org="acme", **edge) == 100


def test_a_machine_out_of_the_rotation_gets_no_idle_zero_only_what_it_still_answers() -> None:
    # m2 is cordoned: the proxy sends it nothing new, and HAProxy stopped counting its
    # sessions once its slot was emptied. A 0 would tell an autoscaler draining it that
    # it had none left while a request it took before may still be in flight there.
    places = {"m1": Place("web", "ams", "w1"), "m2": Place("web", "ams", "w2", routed=False)}
    in_flight: dict[str, int] = {}
    collector = AppFigures(lambda: places, lambda app: "personal", ("ams", "proxy-1"),
                           lambda: in_flight)
    m1 = {"app": "web", "machine": "m1", "region": "ams", "host": "w1", "org": "personal"}
    m2 = {**m1, "machine": "m2", "host": "w2"}
    found = samples(collector)
    assert value(found, "fly_app_concurrency", **m1) == 0
    assert value(found, "fly_app_concurrency", **m2) is None
    in_flight["m2"] = 1  # a request the Python plane sent it before its cordon
    assert value(samples(collector), "fly_app_concurrency", **m2) == 1
