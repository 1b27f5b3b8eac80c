"""The systemd unit of `bodega install-service`: the command as typed, its token kept out."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.cluster.service_unit import quoted, render, split_token

ENV = Path("/etc/bodega/bodega-join.env")


def test_the_unit_runs_the_command_as_typed_and_keeps_the_token_out_of_it() -> None:
    service = render("join", ["10.0.0.1", "--token", "K10secret", "--region", "syd"],
                     python="/opt/bodega/bin/python", workdir=Path("/var/lib/bodega"),
                     name="bodega-join", env_file=ENV)
    assert "ExecStart=/opt/bodega/bin/python -m bodega join 10.0.0.1 --region syd\n" in \
        service.unit
    assert "K10secret" not in service.unit
    assert service.environment == {"BODEGA_JOIN_TOKEN": "K10secret"}
    assert f"EnvironmentFile={ENV}" in service.unit
    # A stop (and a restart) is of bodega alone: machines run on; nothing else is signalled.
    assert "KillSignal=SIGTERM" in service.unit
    assert "KillMode=process" in service.unit
    assert "ExecStop=/bin/sh -c " in service.unit  # ...but for a host shutting down
    assert "WorkingDirectory=/var/lib/bodega" in service.unit
    up = render("up", ["--token=t0k", "--advertise", "10.0.0.1"], python="/usr/bin/python3",
                workdir=Path("/srv"), name="bodega-up", env_file=ENV)
    assert up.environment == {"BODEGA_API_TOKEN": "t0k"}
    plain = render("up", [], python="/usr/bin/python3", workdir=Path("/srv"),
                   name="bodega-up", env_file=ENV)
    assert "EnvironmentFile" not in plain.unit
    assert plain.environment == {}


def test_arguments_are_quoted_as_systemd_reads_them_and_bad_commands_refused() -> None:
    assert quoted("/tmp/my data") == '"/tmp/my data"'
    assert quoted('a"b') == '"a\\"b"'
    assert quoted("100%") == '"100%%"'
    assert quoted("$HOME") == '"$$HOME"'
    assert quoted("plain") == "plain"
    assert split_token(["a", "--token", "x", "b"]) == (["a", "b"], "x")
    with pytest.raises(ValueError, match="needs a value"):
        split_token(["--token"])
    with pytest.raises(ValueError, match="not 'worker'"):
        render("worker", [], python="/usr/bin/python3", workdir=Path("/"), name="x",
               env_file=ENV)
    with pytest.raises(ValueError, match="absolute"):
        render("up", [], python="python3", workdir=Path("/"), name="x", env_file=ENV)
