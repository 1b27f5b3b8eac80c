"""Whether `bodega deploy` builds a Dockerfile first, and the tag it gives the image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bodega.deploy.core.config import AppConfig, load
from bodega.deploy.core.image_build import ImageBuild, image_build

HERE = Path("/apps/web")


def config(**build: str) -> AppConfig:
    return AppConfig.model_validate({"app": "web", "build": build})


def only(*names: str) -> Callable[[Path], bool]:
    return lambda path: path in {HERE / n for n in names}


def test_a_dockerfile_next_to_bodega_toml_is_built_when_no_image_is_set() -> None:
    got = image_build(config(), HERE, only("Dockerfile"), [1, 3, 2])
    assert got == ImageBuild(context=HERE, dockerfile=HERE / "Dockerfile", tag="web:v4")
    assert got.reference("127.0.0.1:5050") == "127.0.0.1:5050/web:v4"


def test_build_dockerfile_names_the_file_relative_to_bodega_toml() -> None:
    got = image_build(config(dockerfile="ops/web.Dockerfile"), HERE,
                      only("ops/web.Dockerfile"), [])
    assert got is not None
    assert (got.dockerfile, got.tag) == (HERE / "ops" / "web.Dockerfile", "web:v1")


def test_a_missing_named_dockerfile_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="does not exist"):
        image_build(config(dockerfile="Nope"), HERE, only(), [])


def test_an_image_or_no_dockerfile_builds_nothing() -> None:
    assert image_build(config(image="nginx:1"), HERE, only("Dockerfile"),
                       []) is None
    assert image_build(config(), HERE, only(), []) is None
    # --image wins over [build] dockerfile.
    assert image_build(config(dockerfile="Dockerfile"), HERE, only("Dockerfile"),
                       [], image_override="r:5000/web:x") is None


def test_build_dockerfile_is_read_from_bodega_toml_and_not_warned_about(tmp_path: Path) -> None:
    toml = tmp_path / "bodega.toml"
    toml.write_text('app = "web"\n[build]\n  dockerfile = "Dockerfile"\n')
    loaded, warnings = load(toml)
    assert loaded.build.dockerfile == "Dockerfile"
    assert not loaded.process_driver
    assert warnings == []


def test_build_args_target_and_ignorefile_reach_buildah() -> None:
    built = AppConfig.model_validate({"app": "web", "build": {
        "args": {"PHP_VERSION": "8.2", "NODE_VERSION": "18"}, "build-target": "prod",
        "ignorefile": ".prodignore"}})
    got = image_build(built, HERE, only("Dockerfile", ".prodignore"), [])
    assert got is not None
    assert got.options() == ["--build-arg=NODE_VERSION=18", "--build-arg=PHP_VERSION=8.2",
                             "--target=prod", f"--ignorefile={HERE / '.prodignore'}"]
    with pytest.raises(ValueError, match=r"\[build\] ignorefile: .* does not exist"):
        image_build(built, HERE, only("Dockerfile"), [])
