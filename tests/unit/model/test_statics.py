"""A request's path through a machine's ``statics``: the file, a refusal, or not the edge's."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bodega.model.machine_config import MachineConfig
from bodega.model.statics import Refuse, Serve, Static, find, holds, request_path

PUBLIC = Static(guest_path="/app/public", url_prefix="/static")
ASSETS = Static(guest_path="/app/assets/", url_prefix="/static/assets/",
                index_document="index.html")
ROOT = Static(guest_path="/srv", url_prefix="/")
BUCKET = Static(guest_path="/x", url_prefix="/media", tigris_bucket="media")


@pytest.mark.parametrize(("path", "expected"), [
    ("/static/site.css", Serve("/app/public/site.css", None, "/static")),
    ("/static", Serve("/app/public", None, "/static")),
    ("/static/", Serve("/app/public", None, "/static")),
    ("/static//css/./a.css", Serve("/app/public/css/a.css", None, "/static")),
    # the longest prefix that holds the path wins, whatever the order
    ("/static/assets/app.js", Serve("/app/assets/app.js", "index.html", "/static/assets/")),
    ("/static/assets", Serve("/app/assets", "index.html", "/static/assets/")),
    ("/static/assetsx", Serve("/app/public/assetsx", None, "/static")),
    ("/statics/a.css", None),  # a prefix holds what goes on below it after a '/'
    ("/", None),
    ("/media/a.png", None),  # a Tigris bucket's: not the edge's
    ("/static/../etc/passwd", Refuse("a '..' step in the path")),
    ("/static/a/../../x", Refuse("a '..' step in the path")),
    ("/static/a\x00b", Refuse("a NUL in the path")),
])
def test_a_path_maps_to_the_file_under_the_longest_prefix_holding_it(
        path: str, expected: Serve | Refuse | None) -> None:
    assert find([PUBLIC, ASSETS, BUCKET], path) == expected
    assert find([ASSETS, PUBLIC, BUCKET], path) == expected


def test_a_root_prefix_holds_every_path_and_a_longer_one_still_wins() -> None:
    assert find([ROOT], "/") == Serve("/srv", None, "/")
    assert find([ROOT], "/robots.txt") == Serve("/srv/robots.txt", None, "/")
    assert find([ROOT, PUBLIC], "/static/x") == Serve("/app/public/x", None, "/static")
    assert holds("/", "/anything")
    assert not holds("/a", "/ab")


@pytest.mark.parametrize(("target", "path"), [
    ("/static/a%20b.css?v=3", "/static/a b.css"),
    ("/static/%2e%2e/x", "/static/../x"),  # decoded first, so refused as '..'
    ("/plain#frag", "/plain"),
    ("*", None),
    ("http://example.com/x", None),
    ("/bad%ff", "/bad\ufffd"),  # not UTF-8: names no file
])
def test_a_request_target_is_decoded_before_it_is_matched(target: str, path: str | None) -> None:
    assert request_path(target) == path


def test_a_decoded_dot_dot_is_refused() -> None:
    path = request_path("/static/%2e%2e/%2e%2e/etc/passwd")
    assert path is not None
    assert isinstance(find([PUBLIC], path), Refuse)


@pytest.mark.parametrize(("fields", "message"), [
    ({"guest_path": "app/public", "url_prefix": "/s"}, "guest_path 'app/public': must start"),
    ({"guest_path": "/app", "url_prefix": "static"}, "url_prefix 'static': must start"),
    ({"guest_path": "/app/../etc", "url_prefix": "/s"}, "no '.' or '..' steps"),
    ({"guest_path": "/app", "url_prefix": "/a b"}, "no '.' or '..' steps, spaces"),
    ({"guest_path": "/app", "url_prefix": "/s", "index_document": "a/index.html"},
     "index_document 'a/index.html': a file name"),
    ({"guest_path": "/app", "url_prefix": "/s", "bucket": "x"}, "Extra inputs"),
])
def test_a_static_is_checked_where_a_config_comes_in(fields: dict[str, str],
                                                      message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        MachineConfig.model_validate({"image": "x", "statics": [fields]})


def test_statics_are_a_typed_field_and_read_back_as_sent() -> None:
    wire = {"image": "registry.example/a:1",
            "statics": [{"guest_path": "/app/public", "url_prefix": "/static",
                         "index_document": "index.html"}]}
    config = MachineConfig.model_validate(wire)
    assert config.statics == [Static(guest_path="/app/public", url_prefix="/static",
                                     index_document="index.html")]
    assert config.to_wire() == wire
