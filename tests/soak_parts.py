"""The soak's parts (tests/soak.py): its options, what it counts, API calls retried across
an API server restart, and the two replica slots whose killed or exited processes are
replaced."""

from __future__ import annotations

import collections
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.controlplane import ControlPlane
from tests.e2e.failover_support import Replica, transient

JSON = dict[str, Any]
T = TypeVar("T")

CRDS = Path(__file__).parents[1] / "crds"
GROUP_LABEL = "kubesched.dev/pod-group"
NAMESPACE = "soak"
SCHEDULER = "kubesched-soak"
LEASE = "kubesched-soak"
TIMINGS = (30.0, 20.0, 2.0)
"""Lease duration, renew deadline, retry period: kube-scheduler's 15/10/2 s stretched
so that a kube-apiserver restart (6-13 s of outage on a loaded 2-core machine) stays
within the renew deadline. A longer outage ends the leader's term by design (it exits,
as kube-scheduler does): the soak would count that as a restart."""


@dataclass
class Options:
    minutes: float = 10.0
    nodes: int = 1000
    pod_rate: float = 8.0
    """Pods created per second (gang members aside)."""
    pod_lifetime: float = 45.0
    """A bound pod is deleted this many seconds after it was bound."""
    gang_every: float = 15.0
    gang_size: tuple[int, int] = (3, 6)
    node_churn_every: float = 10.0
    apiserver_restart_every: float = 150.0
    apiserver_down: float = 3.0
    leader_kill_every: float = 150.0
    settle_timeout: float = 240.0
    seed: int = 1
    controlplane_dir: str = ""
    logs: str = ""
    """Where the replicas' logs go (a temporary directory if empty)."""


@dataclass
class Counts:
    pods_created: int = 0
    gangs_created: int = 0
    pods_deleted: int = 0
    nodes_added: int = 0
    nodes_deleted: int = 0
    cordons: int = 0
    uncordons: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    client_retries: int = 0


def retrying(call: Callable[[], T], *, within: float = 120.0, counts: Counts | None = None) -> T:
    """``call()``, retried while the API server is down or starting (connection errors,
    5xx, 429); a create whose answer was lost and that is retried may then see 409."""
    deadline = time.monotonic() + within
    while True:
        try:
            return call()
        except Exception as e:
            if not transient(e) or time.monotonic() > deadline:
                raise
            if counts is not None:
                counts.client_retries += 1
            time.sleep(0.25)


class ReplicaSlot:
    """One of the two replicas; a killed or exited process is replaced by a new one
    (identity ``replica-<slot>-<generation>``). Keeps every process's RSS samples."""

    def __init__(self, cp: ControlPlane, logs: Path, slot: str) -> None:
        self.cp = cp
        self.logs = logs
        self.slot = slot
        self.generation = 0
        self.replica: Replica | None = None
        self.rss: dict[str, list[tuple[float, int]]] = {}
        """identity -> [(time, VmRSS kB)]."""
        self.peak: dict[str, int] = {}
        """identity -> VmHWM kB (the process's peak resident set)."""
        self.exits: list[JSON] = []
        self.start()

    def start(self) -> None:
        self.generation += 1
        identity = f"replica-{self.slot}-{self.generation}"
        self.replica = Replica(
            identity, self.cp, NAMESPACE, LEASE, SCHEDULER, self.logs, timings=TIMINGS
        )

    def sample(self) -> None:
        r = self.replica
        if r is None or r.popen.poll() is not None:
            return
        try:
            status = Path(f"/proc/{r.popen.pid}/status").read_text()
        except OSError:
            return
        fields = dict(line.split(":", 1) for line in status.splitlines() if line.startswith("Vm"))
        rss = int(fields.get("VmRSS", "0 kB").split()[0])
        hwm = int(fields.get("VmHWM", "0 kB").split()[0])
        self.rss.setdefault(r.identity, []).append((time.monotonic(), rss))
        self.peak[r.identity] = max(self.peak.get(r.identity, 0), hwm)

    def kill(self) -> None:
        """SIGKILL the process (an injected fault) and start its replacement."""
        r = self.replica
        assert r is not None
        self.sample()
        r.popen.send_signal(signal.SIGKILL)
        r.popen.wait(30)
        self.start()

    def check(self) -> bool:
        """True if the process exited by itself (a restart); it is replaced."""
        r = self.replica
        if r is None or r.popen.poll() is None:
            return False
        self.exits.append(
            {"identity": r.identity, "code": r.popen.returncode, "log_tail": r.log()[-2000:]}
        )
        self.start()
        return True
