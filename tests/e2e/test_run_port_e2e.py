"""``kubesched run`` whose endpoints' port is taken: one line and exit 2 at once, before
anything is listed or bound (the server itself starts after the caches sync, but its
port is taken at the start; see kubesched.operator.listen)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(60)


def test_a_port_in_use_is_one_line_and_nothing_is_bound(controlplane: ControlPlane) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "kubesched",
                "run",
                "--kubeconfig",
                str(controlplane.kubeconfig_for()),
                "--no-leader-elect",
                "--scheduler-name",
                "port-in-use",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=45,
        )
    finally:
        taken.close()
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"kubesched: error: --bind-address 127.0.0.1 --port {port}: cannot listen on "
        f"127.0.0.1:{port}: address already in use\n"
    )
