"""A static's file found in an image's root as a chroot there would find it."""

from __future__ import annotations

import os
from pathlib import Path

from bodega.worker.ops.static_files import in_root, regular


def image(root: Path) -> Path:
    (root / "app" / "public" / "docs").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("image's\n")
    (root / "app" / "public" / "a.css").write_text("a\n")
    (root / "app" / "public" / "docs" / "index.html").write_text("docs\n")
    links = {"inside": "a.css", "up": "../../../../../../../etc", "abs": "/etc/passwd",
             "loop": "loop", "dangling": "nothing", "fifo-link": "fifo",
             "to-docs": "/app/public/docs"}
    for name, target in links.items():
        (root / "app" / "public" / name).symlink_to(target)
    os.mkfifo(root / "app" / "public" / "fifo")
    (root / "www").symlink_to("app/public")  # a link on the way
    return root


def test_links_resolve_inside_the_image_root_and_never_out(tmp_path: Path) -> None:
    root = image(tmp_path / "rootfs")
    public = root / "app" / "public"
    assert in_root(root, "/app/public/inside") == public / "a.css"
    assert in_root(root, "/app/public/up/passwd") == root / "etc" / "passwd"
    assert in_root(root, "/app/public/abs") == root / "etc" / "passwd"
    assert in_root(root, "/www/a.css") == public / "a.css"
    assert in_root(root, "/../../etc/passwd") == root / "etc" / "passwd"  # '..' stops at /
    assert in_root(root, "/app/public/loop") is None
    assert in_root(root, "/app/public/dangling") is None
    assert in_root(root, "/app/public/a.css/x") is None  # through a file


def test_only_regular_files_and_a_directorys_index_are_served(tmp_path: Path) -> None:
    root = image(tmp_path / "rootfs")
    found = regular(root, "/app/public/inside", None)
    assert found is not None
    assert found.path.read_text() == "a\n"
    assert found.stat.st_size == 2
    docs = regular(root, "/app/public/to-docs", "index.html")
    assert docs is not None
    assert docs.path == root / "app" / "public" / "docs" / "index.html"
    assert regular(root, "/app/public/docs", None) is None  # a directory, no index named
    assert regular(root, "/app/public", "index.html") is None  # no index there
    assert regular(root, "/app/public/fifo-link", None) is None
    assert regular(root, "/app/public/loop", None) is None


def test_a_copy_is_current_by_its_etag_else_by_its_date() -> None:
    from bodega.worker.api.static_routes import not_modified

    mtime = 1_700_000_000  # Tue, 14 Nov 2023 22:13:20 GMT
    at, before, after = ("Tue, 14 Nov 2023 22:13:20 GMT", "Tue, 14 Nov 2023 22:13:19 GMT",
                         "Wed, 15 Nov 2023 00:00:00 GMT")
    assert not_modified('"e1"', mtime, '"e1"', None)
    assert not_modified('"e1"', mtime, 'W/"e1", "e2"', None)
    assert not_modified('"e1"', mtime, "*", None)
    assert not not_modified('"e1"', mtime, '"e2"', at), "If-None-Match decides when given"
    assert not_modified('"e1"', mtime, None, at)
    assert not_modified('"e1"', mtime, None, after)
    assert not not_modified('"e1"', mtime, None, before)
    assert not not_modified('"e1"', mtime, None, "yesterday")
    assert not not_modified('"e1"', mtime, None, "Tue, 14 Nov 2023 22:13:20"), "no zone"
    assert not not_modified('"e1"', mtime, None, None)
