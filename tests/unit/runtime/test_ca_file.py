"""A CA certificate given on a command line (`--image-registry-ca`, to a worker and a
broker) is read once as the command starts; what is wrong with it is said in one line then."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.runtime.tls.authority import CertificateAuthority
from bodega.runtime.tls.core.identity import cert_pem
from bodega.runtime.tls.files import CaDir, read_ca_file


def test_a_ca_file_is_read_whole(tmp_path: Path) -> None:
    ca = CertificateAuthority.ensure(CaDir(tmp_path / "ca"), "c1")
    given = tmp_path / "ca.crt"
    given.write_bytes(cert_pem(ca.cert))
    assert read_ca_file(given, "--image-registry-ca") == cert_pem(ca.cert).decode()
    assert read_ca_file(None, "--image-registry-ca") is None


def test_a_missing_file_or_one_with_no_certificate_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^--image-registry-ca .*/nowhere: No such file"):
        read_ca_file(tmp_path / "nowhere", "--image-registry-ca")
    for name, content in (("empty", b""), ("text", b"a CA, surely\n"), ("binary", b"\xff\xfe")):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ValueError, match=f"^--flag {path}: not a PEM certificate$"):
            read_ca_file(path, "--flag")
