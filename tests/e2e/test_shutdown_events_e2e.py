"""No Event lost at shutdown: ``kubesched run`` (a child process) binds a burst of 10,000
pods created before it started, is stopped with SIGTERM right after the last bind, and
every pod has its ``Scheduled`` Event on the API server (kube-scheduler writes them all).

The burst outruns the Event writer for a while (a bind and an Event each, the binds
first); what is queued at the SIGTERM is written within ``shutdown_flush_seconds`` before
the process exits. How far behind the writer was at the stop is printed (``-s``), not
asserted: speed is the benchmark's business (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.controlplane import ControlPlane
from tests.controlplane.cluster import free_port

pytestmark = pytest.mark.timeout(900)

PODS = 10_000
NODES = 100
"""110 pods each (the pod count is what fills them: the pods request little)."""
SCHEDULER = "kubesched-shutdown"


@pytest.fixture
def cp(controlplane_factory: Callable[..., ControlPlane]) -> ControlPlane:
    """A control plane of its own: 10,000 pods and their Events would burden the shared one."""
    return controlplane_factory()


def create_pods(cp: ControlPlane, namespace: str) -> list[str]:
    names = [f"burst-{i}" for i in range(PODS)]

    def one(name: str) -> None:
        cp.create_pod(name, namespace=namespace, scheduler_name=SCHEDULER, cpu="10m", memory="16Mi")

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, names))
    return names


def unbound(cp: ControlPlane, namespace: str) -> int:
    page = cp.api.get(
        f"/api/v1/namespaces/{namespace}/pods", fieldSelector="spec.nodeName=", limit="500"
    )
    return len(page["items"])


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    m = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


@pytest.fixture
def scheduler_log(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "kubesched.log"
    yield path


def test_every_scheduled_event_is_written_when_stopped_right_after_a_burst(
    cp: ControlPlane, scheduler_log: Path
) -> None:
    namespace = f"burst-{uuid.uuid4().hex[:6]}"
    cp.ensure_namespace(namespace)
    cp.create_nodes(NODES, pods="110", zones=3)
    names = create_pods(cp, namespace)

    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    argv = [
        sys.executable, "-m", "kubesched", "run",
        f"--kubeconfig={cp.kubeconfig}",
        f"--scheduler-name={SCHEDULER}",
        "--no-leader-elect",
        "--bind-address=127.0.0.1",
        f"--port={port}",
        "--kube-api-qps=0",
        "--shutdown-flush-seconds=60",
        "--log-level=warning",
    ]  # fmt: skip
    with scheduler_log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        started = time.monotonic()
        deadline = started + 600
        while unbound(cp, namespace):
            assert proc.poll() is None, scheduler_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"{unbound(cp, namespace)} pods still unbound"
            time.sleep(0.5)
        all_bound = time.monotonic()
        queued = metric(port, "kubesched_event_queue_length")
        written = metric(port, "kubesched_events_written_total")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        stopped = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = scheduler_log.read_text(errors="replace")
    print(
        f"\n{PODS} pods bound {all_bound - started:.1f} s after start; at SIGTERM "
        f"{written} Events written, {queued} queued; exited {stopped - all_bound:.1f} s later"
    )
    assert code == 0, log[-3000:]
    assert "unwritten" not in log, log[-3000:]

    events = cp.api.list("events.k8s.io/v1", "Event", namespace)
    scheduled = {e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled"}
    missing = sorted(set(names) - scheduled)
    assert not missing, f"{len(missing)} of {PODS} pods have no Scheduled event: {missing[:5]}"
    one = next(e for e in events if e.get("reason") == "Scheduled")
    assert one["reportingController"] == SCHEDULER
    assert re.fullmatch(rf"Successfully assigned {namespace}/burst-\d+ to node-\d+", one["note"]), (
        one["note"]
    )
