"""The vendored scripts are what the manifest says, byte for byte, and the pages load only them.

The dashboard's htmx and its SSE extension were fetched once from npm and
committed with their sha256; this recomputes each, so a vendored file cannot
change (or a new one appear) without the manifest saying so.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from bodega.broker.ui.render import STATIC

VENDOR = STATIC / "vendor"
TEMPLATES = Path(STATIC).parent / "templates"


def manifest() -> list[dict[str, str]]:
    return list(json.loads((VENDOR / "MANIFEST.json").read_text())["files"])


def test_every_vendored_file_matches_its_sha256() -> None:
    for entry in manifest():
        digest = hashlib.sha256((VENDOR / entry["file"]).read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{entry['file']} changed: {digest}"


def test_the_manifest_names_every_vendored_file_with_its_package_and_version() -> None:
    files = {p.name for p in VENDOR.iterdir() if p.name != "MANIFEST.json"}
    assert files == {e["file"] for e in manifest()}
    by_package = {e["package"]: e["version"] for e in manifest()}
    assert by_package["htmx.org"].startswith("2.")  # htmx 2, as the dashboard is written for
    assert by_package["htmx-ext-sse"].startswith("2.")


def test_pages_load_scripts_only_from_the_vendored_files() -> None:
    sources = set()
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert "<script>" not in text, template.name  # no inline script
        assert " on" + "click=" not in text, template.name
        sources |= set(re.findall(r'<script[^>]*src="([^"]+)"', text))
    assert sources == {f"/ui/static/vendor/{e['file']}" for e in manifest()}
