"""How `bodega build` and `bodega deploy` push: to the cluster's registry over TLS checked
against the CA the cluster names, the command's token in an auth file of the push's own;
to a registry named by hand as buildah would."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from bodega.cli.commands.build import (
    PushTarget,
    auth_file,
    build_and_push,
    build_commands,
    on_registry,
    push_command,
    push_options,
)

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
CLUSTERS = PushTarget("10.250.7.1:26160", CA, "the-admin-token", "context 'local'")


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_clusters_registry_is_pushed_to_over_tls_with_its_ca_and_the_token(
        tmp_path: Path) -> None:
    options = push_options(CLUSTERS, "10.250.7.1:26160/web:v1", tmp_path)
    assert "--tls-verify=true" in options
    certs = Path(flag(options, "--cert-dir"))
    assert certs.parent == tmp_path
    assert (certs / "ca.crt").read_text() == CA  # containers/image reads *.crt as CAs
    auth = Path(flag(options, "--authfile"))
    assert stat.S_IMODE(auth.stat().st_mode) == 0o600
    basic = json.loads(auth.read_text())["auths"]["10.250.7.1:26160"]["auth"]
    assert base64.b64decode(basic).decode().split(":", 1)[1] == "the-admin-token"
    assert "the-admin-token" not in " ".join(options)  # never on a command line


def test_loopback_is_the_clusters_too_and_gets_tls(tmp_path: Path) -> None:
    local = PushTarget("127.0.0.1:5050", CA, "t")
    options = push_options(local, "127.0.0.1:5050/web:v1", tmp_path)
    assert "--tls-verify=true" in options
    assert "--cert-dir" in options


def test_a_registry_named_by_hand_gets_no_token_and_no_cluster_ca(tmp_path: Path) -> None:
    assert push_options(PushTarget("127.0.0.1:5000"), "127.0.0.1:5000/web:v1", tmp_path) == [
        "--tls-verify=false"]  # plain HTTP to loopback, as buildah would
    assert push_options(PushTarget("registry.example"), "registry.example/web:v1",
                        tmp_path) == ["--tls-verify=true"]
    # A name whose registry is not the cluster's is not given the cluster's token.
    assert push_options(CLUSTERS, "registry.example/web:v1", tmp_path) == [
        "--tls-verify=true"]
    assert list(tmp_path.iterdir()) == []


def test_a_cluster_without_tls_is_pushed_to_in_plain_http(tmp_path: Path) -> None:
    plain = PushTarget("127.0.0.1:5050", None, "t")  # --internal-tls off: no CA named
    assert push_options(plain, "127.0.0.1:5050/web:v1", tmp_path) == ["--tls-verify=false"]


def test_the_push_carries_the_options_and_writes_the_digest(tmp_path: Path) -> None:
    build, push = build_commands(tmp_path, "r:1/web:v1", None, tmp_path / "digest",
                                 ["--tls-verify=true", "--cert-dir", "/c"])
    assert build == ["buildah", "bud", "--quiet", "-t", "r:1/web:v1", str(tmp_path)]
    assert push == ["buildah", "push", "--quiet", "--tls-verify=true", "--cert-dir", "/c",
                    "--digestfile", str(tmp_path / "digest"), "r:1/web:v1",
                    "docker://r:1/web:v1"]


def test_the_auth_file_names_the_registry_alone() -> None:
    assert list(json.loads(auth_file("h:1", "x"))["auths"]) == ["h:1"]


def test_every_registry_of_the_cluster_gets_the_ca_and_the_token(tmp_path: Path) -> None:
    """A push lands on each of the cluster's live registries (every server host runs one):
    each is pushed to over TLS with the cluster's CA, and the auth file names them all."""
    every = PushTarget("10.250.7.1:26160", CA, "the-admin-token", "context 'local'",
                       mirrors=("10.250.7.2:26161", "10.250.7.1:26160"))
    assert every.registries == ("10.250.7.1:26160", "10.250.7.2:26161")
    options = push_options(every, "10.250.7.2:26161/web:v1", tmp_path)
    assert "--tls-verify=true" in options
    auths = json.loads(Path(flag(options, "--authfile")).read_text())["auths"]
    assert sorted(auths) == ["10.250.7.1:26160", "10.250.7.2:26161"]


def test_a_push_to_another_registry_names_the_built_image_there(tmp_path: Path) -> None:
    argv = push_command("10.250.7.1:26160/web:v1", on_registry("10.250.7.1:26160/web:v1",
                                                               "10.250.7.2:26161"),
                        ["--tls-verify=true"], tmp_path / "d")
    assert argv[-2:] == ["10.250.7.1:26160/web:v1", "docker://10.250.7.2:26161/web:v1"]


FAKE_BUILDAH = """#!/bin/sh
# buildah as a push sees it: a registry on a lost host refuses the connection, one that
# does not take the token says so, the others take the image and write its digest.
step="$1"; last=""; digestfile=""
[ "$step" = push ] || exit 0  # the build
while [ $# -gt 0 ]; do
  case "$1" in --digestfile) digestfile="$2"; shift ;; esac
  last="$1"; shift
done
case "$last" in
  *10.0.0.1:*) echo "pinging container registry: connect: connection refused" >&2; exit 1 ;;
  *10.0.0.9:*) echo "authentication required" >&2; exit 1 ;;
esac
[ -n "$digestfile" ] && printf 'sha256:%064d' 7 > "$digestfile"
echo "$last" >> "$(dirname "$0")/pushed"
exit 0
"""


@pytest.fixture
def fake_buildah(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "buildah"
    script.write_text(FAKE_BUILDAH)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return bin_dir / "pushed"


def test_a_push_passes_over_a_lost_hosts_registry_and_lands_on_the_others(
        tmp_path: Path, fake_buildah: Path, capsys: pytest.CaptureFixture[str]) -> None:
    push = PushTarget("10.0.0.1:5000", CA, "tok", "ctx", mirrors=("10.0.0.2:5000",
                                                                   "10.0.0.3:5000"))
    digest = build_and_push(tmp_path, "10.0.0.1:5000/web:v1", None, push)
    assert digest == f"sha256:{7:064d}"
    assert fake_buildah.read_text().split() == ["docker://10.0.0.2:5000/web:v1",
                                                "docker://10.0.0.3:5000/web:v1"]
    assert "connection refused (10.0.0.1:5000)" in capsys.readouterr().err


def test_a_push_no_registry_takes_fails_and_a_refused_token_fails_at_once(
        tmp_path: Path, fake_buildah: Path) -> None:
    lost = PushTarget("10.0.0.1:5000", CA, "tok", "ctx")
    with pytest.raises(ValueError, match="connection refused"):
        build_and_push(tmp_path, "10.0.0.1:5000/web:v1", None, lost)
    refused = PushTarget("10.0.0.9:5000", CA, "tok", "context 'x'",
                         mirrors=("10.0.0.2:5000",))
    with pytest.raises(ValueError, match="refused the push: it takes pushes with an admin"):
        build_and_push(tmp_path, "10.0.0.9:5000/web:v1", None, refused)
    assert not fake_buildah.exists()  # the refusal is the caller's to fix: no other tried
