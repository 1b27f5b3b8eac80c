"""A plain ``pip install`` of bodega, without extras, runs: in a fresh virtualenv holding
only what ``[project] dependencies`` names, every module imports, every package any of
them imports is installed, and ``bodega --help`` answers.

pip installs a copy of the checkout's package sources (building in the checkout itself
would leave ``build/`` there), from the index pip is configured with, as a user's
``pip install .`` does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
WALK = Path(__file__).with_name("import_walk_kit.py")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with bodega installed without extras: its bin directory."""
    root = tmp_path_factory.mktemp("plain-install")
    source = root / "source"
    shutil.copytree(CHECKOUT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, source / name)
    venv = root / "venv"
    # No pip of its own (ensurepip takes seconds): this interpreter's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--no-compile", "--root-user-action=ignore", str(source)],
        capture_output=True, text=True, timeout=900, env=env, cwd=root, check=False)
    assert done.returncode == 0, done.stderr
    return venv / "bin"


def walked(plain: Path) -> dict[str, Any]:
    done = subprocess.run([str(plain / "python"), "-I", str(WALK)], capture_output=True,
                          text=True, timeout=300, cwd=plain.parent, check=False)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_every_module_imports_with_the_runtime_dependencies_alone(plain: Path) -> None:
    found = walked(plain)
    assert found["failed"] == {}
    assert found["missing"] == {}
    assert Path(found["location"]).is_relative_to(plain.parent)  # the install, not the checkout
    assert "bodega.registry.sync.client" in found["modules"]


def test_the_installed_command_answers_help(plain: Path) -> None:
    done = subprocess.run([str(plain / "bodega"), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=plain.parent, check=False)
    assert done.returncode == 0, done.stderr
    assert "Usage: bodega" in done.stdout
