"""What one of the cluster's image registries copies of another's (model/image_copies.py)."""

from __future__ import annotations

import json

import pytest

from bodega.model.image_copies import Copy, Named, copies, named_by

A, B, C = (f"sha256:{c * 64}" for c in "abc")


def test_a_missing_tag_is_copied_with_its_manifest() -> None:
    assert copies({"v1": A}, {}, set()) == [Copy("v1", A, manifest=True, retag=True)]


def test_nothing_is_copied_twice() -> None:
    assert copies({"v1": A, "v2": B}, {"v1": A, "v2": B}, {A, B}) == []


def test_a_manifest_held_untagged_only_gets_its_tag() -> None:
    assert copies({"v1": A}, {}, {A}) == [Copy("v1", A, manifest=False, retag=True)]


def test_a_tag_held_for_another_manifest_is_kept_and_the_peers_manifest_copied() -> None:
    """No order between the two pushes is known: the tag stays, but the digest a deploy
    pinned is there to pull either way."""
    assert copies({"v1": A}, {"v1": B}, {B}) == [Copy("v1", A, manifest=True, retag=False)]


def test_what_a_manifest_names() -> None:
    image = json.dumps({"schemaVersion": 2, "config": {"digest": A},
                        "layers": [{"digest": B}, {"digest": C}]}).encode()
    assert named_by(image) == Named((), (A, B, C))
    index = json.dumps({"schemaVersion": 2, "manifests": [{"digest": A}, {"digest": B}]})
    assert named_by(index.encode()) == Named((A, B), ())
    with pytest.raises(ValueError, match="not a manifest"):
        named_by(b"[]")
    with pytest.raises(ValueError, match="not a manifest"):
        named_by(b"\xff")
