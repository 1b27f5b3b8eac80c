"""From the certificates and maps HAProxy holds to those wanted: runtime-API steps only."""

from __future__ import annotations

from bodega.proxy.haproxy.core.edge import (
    Site,
    Step,
    aliases,
    cert_steps,
    map_steps,
    render_crt_list,
)

LIST, DIR = "/h/certs.list", "/h/certs"


def site(host: str, fp: str = "f1", app: str = "web") -> Site:
    return Site(host, app, fp, f"PEM {host} {fp}")


def test_a_new_certificate_is_made_committed_then_listed_for_its_sni() -> None:
    steps = cert_steps({}, {"www.example.com": site("www.example.com")}, LIST, DIR)
    path = f"{DIR}/www.example.com.pem"
    assert steps == [Step(f"new ssl cert {path}"),
                     Step(f"set ssl cert {path}", "PEM www.example.com f1"),
                     Step(f"commit ssl cert {path}"),
                     Step(f"add ssl crt-list {LIST}", f"{path} www.example.com")]


def test_a_renewal_swaps_in_place_and_a_removal_unlists_first() -> None:
    loaded = {"a.test": "f1", "gone.test": "f1", "same.test": "f1"}
    wanted = {"a.test": site("a.test", "f2"), "same.test": site("same.test")}
    assert cert_steps(loaded, wanted, LIST, DIR) == [
        Step(f"del ssl crt-list {LIST} {DIR}/gone.test.pem"),
        Step(f"del ssl cert {DIR}/gone.test.pem"),
        Step(f"set ssl cert {DIR}/a.test.pem", "PEM a.test f2"),
        Step(f"commit ssl cert {DIR}/a.test.pem")]
    assert cert_steps({"a.test": "f2"}, {"a.test": site("a.test", "f2")}, LIST, DIR) == []


def test_the_crt_list_starts_with_the_default_and_a_wildcard_has_a_file_name() -> None:
    text = render_crt_list("/d.pem", {"*.web.localhost": site("*.web.localhost")}, DIR)
    assert text == f"/d.pem\n{DIR}/_wildcard_.web.localhost.pem *.web.localhost\n"


def test_map_steps_add_change_and_delete() -> None:
    assert map_steps("/m", {"a": "1", "b": "1", "c": "x"}, {"a": "1", "c": "y", "d": "1"}) == [
        Step("del map /m b"), Step("set map /m c y"), Step("add map /m d 1")]


def test_aliases_send_a_certificates_hostname_to_its_apps_host_but_not_wildcards() -> None:
    sites = {"www.example.com": site("www.example.com"), "*.x.test": site("*.x.test"),
             "web.localhost": site("web.localhost"), "o.test": site("o.test", app="gone")}
    assert aliases(sites, {"web": "web.localhost"}) == {"www.example.com": "web.localhost"}
