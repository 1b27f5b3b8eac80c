"""Port claims are a network namespace's: hosts made of namespaces on one kernel each take
their own 51820, and two processes in one namespace never take the same port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace needs root")

# Claims UDP 51820 in the lock directory given, says whether it got it, and holds it until
# its stdin closes.
CLAIMER = """
import sys
from pathlib import Path
from bodega.cluster.port_claims import PortClaims
claims = PortClaims(lock_dir=Path(sys.argv[1]))
print("took" if claims.take("udp", 51820) else "refused", flush=True)
sys.stdin.read()
"""


def claim(lock_dir: Path, *, own_network: bool) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", CLAIMER, str(lock_dir)]
    return subprocess.Popen(["unshare", "--net", *argv] if own_network else argv,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_port_claimed_in_one_network_namespace_is_free_in_another(tmp_path: Path) -> None:
    holder = claim(tmp_path, own_network=False)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "took"
        neighbour = claim(tmp_path, own_network=False)
        other_host = claim(tmp_path, own_network=True)
        for process, expected in ((neighbour, "refused"), (other_host, "took")):
            out, _ = process.communicate("", timeout=30)
            assert out.strip() == expected
    finally:
        holder.communicate("", timeout=30)
