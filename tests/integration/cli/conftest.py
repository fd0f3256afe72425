"""The command line's mistakes: a home without a kubeconfig, outside a cluster, and a
few bad files to name on the command line."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from kubesched.cli.run import ENV_PREFIX

GARBLED = "apiVersion: v1\nclusters: [\n  - {name: x\n"
NO_CONTEXT = "apiVersion: v1\nkind: Config\n"
_CONTEXT_AND_USER = (
    "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
)
MISSHAPEN_KUBECONFIGS = {
    # kubernetes_asyncio's loader raised AssertionError / AttributeError on these (a
    # traceback), or said "'str' object does not support item assignment"
    "server-a-number.yaml": "current-context: x\nclusters: [{name: c, cluster: {server: 3}}]\n"
    + _CONTEXT_AND_USER,
    "context-a-number.yaml": "current-context: x\n"
    "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
    "contexts: [{name: x, context: 5}]\nusers: [{name: u, user: {}}]\n",
    "a-string.yaml": "kubeconfig\n",
    "blank.yaml": "",
    "password-a-number.yaml": "current-context: x\nclusters: [{name: c, cluster: {server: 3}}]\n"
    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    "users: [{name: u, user: {password: 271828}}]\n",
    "exec-missing.yaml": "current-context: x\n"
    "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
    "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    "users: [{name: u, user: {exec: {command: /nonexistent/get-token,"
    " apiVersion: client.authentication.k8s.io/v1}}}]\n",
}
POD_WITHOUT_NODES = """\
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers: [{name: c, image: app}]
"""


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: connecting is refused


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_port: int) -> Path:
    """A home without ~/.kube, no KUBECONFIG, not in a cluster, and a few bad files."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    for var in list(os.environ):
        if var.startswith(ENV_PREFIX):
            monkeypatch.delenv(var)
    # `run` tunes the garbage collector of its process: not of the test runner's
    monkeypatch.setattr("kubesched.operator.run.tune_garbage_collector", lambda: None)
    (tmp_path / "garbled.yaml").write_text(GARBLED)
    (tmp_path / "no-context.yaml").write_text(NO_CONTEXT)
    (tmp_path / "empty.yaml").write_text("# to do\n")
    (tmp_path / "no-nodes.yaml").write_text(POD_WITHOUT_NODES)
    for name, text in MISSHAPEN_KUBECONFIGS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "unreachable.yaml").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{closed_port}'}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    return tmp_path
