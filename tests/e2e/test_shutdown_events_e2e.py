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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.controlplane import ControlPlane, free_port
from tests.e2e.failover_support import ProxyThread

pytestmark = pytest.mark.timeout(900)

PODS = 10_000
NODES = 100
"""110 pods each (the pod count is what fills them: the pods request little)."""
SCHEDULER = "kubesched-shutdown"


@pytest.fixture
def cp(controlplane_factory: Callable[..., ControlPlane]) -> ControlPlane:
    """A control plane of its own: 10,000 pods and their Events would burden the shared one."""
    return controlplane_factory()


def create_pods(
    cp: ControlPlane, namespace: str, n: int, scheduler: str = SCHEDULER, prefix: str = "burst"
) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(n)]

    def one(name: str) -> None:
        cp.create_pod(name, namespace=namespace, scheduler_name=scheduler, cpu="10m", memory="16Mi")

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


@dataclass
class Stop:
    code: int
    log: str
    bound_after: float
    queued: float | None
    written: float | None
    exit_after: float


def start_kubesched(
    kubeconfig: Path, log_path: Path, port: int, scheduler: str = SCHEDULER
) -> subprocess.Popen[bytes]:
    """``kubesched run`` as a child process, its output into ``log_path``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    argv = [
        sys.executable, "-m", "kubesched", "run",
        f"--kubeconfig={kubeconfig}",
        f"--scheduler-name={scheduler}",
        "--no-leader-elect",
        "--bind-address=127.0.0.1",
        f"--port={port}",
        "--kube-api-qps=0",
        "--shutdown-flush-seconds=120",
        "--log-level=warning",
    ]  # fmt: skip
    with log_path.open("wb") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
        )


def burst_then_sigterm(cp: ControlPlane, kubeconfig: Path, namespace: str, log_path: Path) -> Stop:
    """Start ``kubesched run``, wait until every pod of ``namespace`` is bound, SIGTERM."""
    port = free_port()
    proc = start_kubesched(kubeconfig, log_path, port)
    try:
        started = time.monotonic()
        deadline = started + 600
        while unbound(cp, namespace):
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, f"{unbound(cp, namespace)} pods still unbound"
            time.sleep(0.5)
        all_bound = time.monotonic()
        queued = metric(port, "kubesched_event_queue_length")
        written = metric(port, "kubesched_events_written_total")
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=180)
        stopped = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stop = Stop(
        code,
        log_path.read_text(errors="replace"),
        all_bound - started,
        queued,
        written,
        stopped - all_bound,
    )
    print(
        f"\npods bound {stop.bound_after:.1f} s after start; at SIGTERM {written} Events "
        f"written, {queued} queued; exited {stop.exit_after:.1f} s later"
    )
    return stop


def assert_every_pod_has_its_scheduled_event(
    cp: ControlPlane, namespace: str, names: list[str], stop: Stop
) -> None:
    assert stop.code == 0, stop.log[-3000:]
    assert "unwritten" not in stop.log, stop.log[-3000:]
    events = cp.api.list("events.k8s.io/v1", "Event", namespace)
    scheduled = {e["regarding"]["name"] for e in events if e.get("reason") == "Scheduled"}
    missing = sorted(set(names) - scheduled)
    assert not missing, (
        f"{len(missing)} of {len(names)} pods have no Scheduled event: {missing[:5]}"
    )
    one = next(e for e in events if e.get("reason") == "Scheduled")
    assert one["reportingController"] == SCHEDULER
    assert re.fullmatch(rf"Successfully assigned {namespace}/burst-\d+ to node-\d+", one["note"]), (
        one["note"]
    )


def test_every_scheduled_event_is_written_when_stopped_right_after_a_burst(
    cp: ControlPlane, tmp_path: Path
) -> None:
    namespace = f"burst-{uuid.uuid4().hex[:6]}"
    cp.ensure_namespace(namespace)
    cp.create_nodes(NODES, pods="110", zones=3)
    names = create_pods(cp, namespace, PODS)
    stop = burst_then_sigterm(cp, cp.kubeconfig, namespace, tmp_path / "kubesched.log")
    assert_every_pod_has_its_scheduled_event(cp, namespace, names, stop)


def test_a_backlog_of_events_behind_a_slow_api_server_is_written_before_exit(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """Every Event write takes half a second at a proxy (32 a second with 16 writers, well
    below the bind rate): thousands are still queued when the last pod is bound, and the
    stop writes them all within --shutdown-flush-seconds."""
    namespace = f"slow-{uuid.uuid4().hex[:6]}"
    cp.ensure_namespace(namespace)
    cp.create_nodes(20, pods="110", zones=3)
    names = create_pods(cp, namespace, 2000)
    proxy = ProxyThread(cp)
    try:
        proxy.do(proxy.proxy.hang_next, "POST", r"/events$", 10_000, 0.5)
        stop = burst_then_sigterm(cp, proxy.kubeconfig, namespace, tmp_path / "kubesched.log")
    finally:
        proxy.close()
    assert_every_pod_has_its_scheduled_event(cp, namespace, names, stop)


def test_a_sigterm_as_the_first_pod_is_bound_ends_the_process(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """A stop that arrives as the first bind completes (when the start-up's waits for it
    end: the initial sync's, the server's) ends the process within seconds. It used to
    wait forever: on Python 3.11 ``asyncio.wait_for`` lost the cancellation that came as
    the awaited event was set, and shutdown then waited for those tasks. A SIGTERM sent
    as soon as a watch saw the first pod bound hit that moment in each of 4 tries."""
    namespace = f"first-{uuid.uuid4().hex[:6]}"
    cp.ensure_namespace(namespace)
    cp.create_nodes(20, pods="110", zones=3)
    path = f"/api/v1/namespaces/{namespace}/pods"
    for attempt in range(3):
        scheduler = f"first-bind-{attempt}"
        create_pods(cp, namespace, 300, scheduler, prefix=scheduler)
        since = cp.api.get(path, limit="1")["metadata"]["resourceVersion"]
        events = cp.api.watch(path, since, timeout=120)
        log_path = tmp_path / f"{scheduler}.log"
        proc = start_kubesched(cp.kubeconfig, log_path, free_port(), scheduler)
        try:
            for event in events:
                obj = event["object"]
                if obj["spec"].get("schedulerName") == scheduler and obj["spec"].get("nodeName"):
                    break
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    f"try {attempt}: still running 30 s after a SIGTERM at the first bind\n"
                    + log_path.read_text(errors="replace")[-3000:]
                )
            print(f"\ntry {attempt}: exited {code} {time.monotonic() - sent:.2f} s after")
            assert code == 0, log_path.read_text(errors="replace")[-3000:]
        finally:
            events.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
