"""What `bodega` prints to a pipe (a file, a program) is never wrapped or cut at 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_lines_to_a_pipe_are_never_wrapped() -> None:
    line = "release " + " ".join(f"word-{n}" for n in range(40))
    done = subprocess.run(
        [sys.executable, "-c",
         f"from bodega.cli.session.api import console; console.print({line!r})"],
        capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == [line]


def test_tables_to_a_pipe_keep_long_values_whole(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    token_file = tmp_path / ("a-rather-long-directory-name-" * 4) / "api-token"
    env = {**os.environ, "BODEGA_CONFIG": str(config)}
    subprocess.run([sys.executable, "-m", "bodega", "context", "add", "far", "--api-url",
                    "http://cluster.example.internal:4280", "--token-file", str(token_file)],
                   env=env, check=True, capture_output=True, timeout=60)
    done = subprocess.run([sys.executable, "-m", "bodega", "context", "list"], env=env,
                          capture_output=True, text=True, check=True, timeout=60)
    rows = done.stdout.splitlines()
    assert len(rows) == 2, done.stdout
    assert rows[1].split() == ["*", "far", "http://cluster.example.internal:4280",
                               str(token_file), "(the", "cluster's)"]
    assert config.stat().st_mode & 0o777 == 0o600
