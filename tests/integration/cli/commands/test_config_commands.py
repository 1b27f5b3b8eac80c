"""`bodega config validate` and `bodega config show`, run as a user types them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CORPUS = Path(__file__).parents[3] / "data" / "fly-toml"
OLD_TEMPLATE = CORPUS / "real" / "remix-run--indie-stack--fly.toml"


def bodega(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=cwd)


def test_validate_passes_an_old_template_beside_its_dockerfile_with_warnings(
        tmp_path: Path) -> None:
    (tmp_path / "fly.toml").write_text(OLD_TEMPLATE.read_text())
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    done = bodega("config", "validate", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("fly.toml is valid: a deploy would go ahead"), done.stdout
    warnings = done.stderr.splitlines()
    assert ("Warning: fly.toml:22: services.0.script_checks: unknown key (did you mean "
            "`tcp_checks`?)") in warnings
    assert any("experimental.auto_rollback: ignored by bodega" in w for w in warnings)
    done = bodega("config", "validate", "--strict", cwd=tmp_path)
    assert done.returncode == 1
    assert "Error: fly.toml:22: services.0.script_checks: unknown key (did" in done.stderr


def test_validate_json_names_key_and_line_of_each_problem(tmp_path: Path) -> None:
    path = tmp_path / "fly.toml"
    path.write_text('app = "x"\n\n[http_service]\n  internal_port = 99999\n  enable_ha = 1\n')
    done = bodega("config", "validate", "--json", "-c", str(path), "--image", "r.example/x:1")
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["ok"] is False
    assert answer["warnings"] == [{"key": "http_service.enable_ha", "line": 5,
                                   "message": "unknown key"}]
    (error,) = answer["errors"]
    assert (error["key"], error["line"]) == ("http_service.internal_port", 4)
    assert "less than or equal to 65535" in error["message"]


def test_validate_without_an_image_says_how_to_give_one(tmp_path: Path) -> None:
    path = tmp_path / "fly.toml"
    path.write_text('app = "x"\n')
    done = bodega("config", "validate", "-c", str(path))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"Error: {path}: processes.app: process group 'app' has no image and no command: put "
        "a Dockerfile beside the config (or name one in [build] dockerfile), give [build] "
        "image or --image, or a [processes] command to run as a process"]


def test_show_prints_the_config_and_each_groups_machine_config(tmp_path: Path) -> None:
    (tmp_path / "fly.toml").write_text(OLD_TEMPLATE.read_text())
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    done = bodega("config", "show", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["kill_timeout"] == "5s"
    assert shown["mounts"] == [{"source": "data", "destination": "/data"}]
    assert "script_checks" not in shown["services"][0]
    done = bodega("config", "show", "--machines", cwd=tmp_path)
    machines = json.loads(done.stdout)
    assert machines["app"]["stop_config"] == {"signal": "SIGINT", "timeout": "5s"}
    assert machines["app"]["init"] == {"cmd": ["start.sh"], "entrypoint": ["sh"]}


def test_every_real_file_of_the_corpus_is_valid_to_the_command_a_user_types() -> None:
    """The corpus's files from public repositories, nobody's here, each through
    ``bodega config validate --json``: valid, and every warning names a key and its line."""
    real = sorted((CORPUS / "real").glob("*.toml"))
    assert len(real) >= 30
    for path in real:
        names_app = any(line.split("=")[0].strip() == "app"
                        for line in path.read_text().splitlines())
        app = () if names_app else ("-a", "corpus-app")
        done = bodega("config", "validate", "--json", "-c", str(path), *app,
                      "--image", "registry.example/app:1")
        answer = json.loads(done.stdout)
        assert (done.returncode, answer["ok"], answer["errors"]) == (0, True, []), path
        for warning in answer["warnings"]:
            assert set(warning) == {"key", "line", "message"}, (path, warning)
            assert warning["line"] > 0, (path, warning)
            assert all((warning["key"], warning["message"])), (path, warning)
