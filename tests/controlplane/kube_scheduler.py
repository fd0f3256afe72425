"""The real kube-scheduler of the same release, run against a test control plane
(:meth:`tests.controlplane.ControlPlane.start_kube_scheduler` starts it)."""

from __future__ import annotations

import copy
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubesched.bench.controlplane import ControlPlaneError, Process
from tests.controlplane.rest import JSON
from tests.controlplane.waiting import wait_for

__all__ = ["KubeScheduler", "scheduler_config"]


class KubeScheduler(Process):
    """The real kube-scheduler of the same release, running against a ControlPlane."""

    def __init__(self, argv: Sequence[str], log_path: Path, port: int, config: JSON) -> None:
        super().__init__("kube-scheduler", argv, log_path)
        self.port = port
        self.config = config
        self.url = f"https://127.0.0.1:{port}"

    def _get(self, path: str) -> tuple[int, str]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the scheduler's own self-signed serving cert
        try:
            with urllib.request.urlopen(f"{self.url}{path}", context=ctx, timeout=5) as resp:
                return int(resp.status), resp.read().decode()
        except urllib.error.HTTPError as err:
            with err:  # its connection closed now, not in a later test's garbage collection
                return err.code, err.read().decode(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until /readyz answers ok (informers synced)."""

        def ready() -> bool:
            self.check_running()
            try:
                return self._get("/readyz")[0] == 200
            except OSError:
                return False

        wait_for(ready, timeout=timeout, interval=0.2, what="kube-scheduler /readyz")

    def metrics(self) -> str:
        """The Prometheus text of /metrics (anonymous access is allowed for it)."""
        status, text = self._get("/metrics")
        if status != 200:
            raise ControlPlaneError(f"kube-scheduler /metrics: {status} {text[:200]}")
        return text


def scheduler_config(
    config: str | os.PathLike[str] | Mapping[str, Any] | None,
    kubeconfig: Path,
    *,
    qps: float,
    burst: int,
) -> JSON:
    """A KubeSchedulerConfiguration (a file, a dict, or None for the defaults) with
    ``clientConnection.kubeconfig``/``qps``/``burst`` and ``leaderElection`` filled in
    where missing: the given client, no leader election."""
    if config is None:
        cfg: JSON = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
        }
    elif isinstance(config, Mapping):
        cfg = copy.deepcopy(dict(config))
    else:
        cfg = yaml.safe_load(Path(config).read_text())
    conn = cfg.setdefault("clientConnection", {})
    conn.setdefault("kubeconfig", str(kubeconfig))
    conn.setdefault("qps", qps)
    conn.setdefault("burst", burst)
    cfg.setdefault("leaderElection", {}).setdefault("leaderElect", False)
    return cfg
