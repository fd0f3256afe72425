"""``scheduler_queue_incoming_pods_total`` against the real kube-scheduler: the same story
played to each on the shared control plane, and the counts by queue and event compared.

The story: a pod that fits, one too big for the only node of its pool, and a gated one;
a node that fits the big pod joins the pool, once its backoff is over or while it backs
off; then the gated pod's gate is removed. Every move of it is named by what caused it (the pod's add, the
failed attempt, the node's add, the pod's own update).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable

import pytest
from prometheus_client import generate_latest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.e2e.support import call, local_settings, running

METRIC = "scheduler_queue_incoming_pods_total"
_SAMPLE = re.compile(r"^" + METRIC + r"\{([^}]*)\} ([0-9.e+]+)$")


def incoming(text: str) -> dict[tuple[str, str], float]:
    """(queue, event) -> count, from Prometheus text; zero samples left out."""
    out: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if float(m.group(2)):
            out[(labels["queue"], labels["event"])] = float(m.group(2))
    return out


def story(
    cp: ControlPlane, namespace: str, scheduler: str, scrape: Callable[[], str], pause: float
) -> str:
    """Play the story to ``scheduler`` (already running), the big pod's node ``pause``
    seconds after its failure; return the scheduler's metrics at the end."""
    pool = {"e2e.kubesched.dev/pool": f"incoming-{uuid.uuid4().hex[:8]}"}
    spec = {"nodeSelector": pool}
    cp.create_nodes(1, cpu="1", labels=pool, prefix=f"{scheduler}-small-")
    time.sleep(1)  # the node in the scheduler's cache before the pods come
    common = {"namespace": namespace, "scheduler_name": scheduler, "spec": spec}
    fits, big, gated = (f"{scheduler}-{name}" for name in ("fits", "big", "gated"))
    cp.create_pod(fits, cpu="500m", **common)  # type: ignore[arg-type]
    cp.create_pod(big, cpu="4", **common)  # type: ignore[arg-type]
    held = {**spec, "schedulingGates": [{"name": "e2e.kubesched.dev/wait"}]}
    cp.create_pod(gated, namespace=namespace, scheduler_name=scheduler, spec=held)
    cp.wait_bound(fits, namespace)

    def big_failed() -> bool:
        pod = cp.api.read("v1", "Pod", big, namespace)
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in pod["status"].get("conditions") or ()
        )

    deadline = time.monotonic() + 30
    while not big_failed():
        assert time.monotonic() < deadline, "the big pod was never reported unschedulable"
        time.sleep(0.1)
    time.sleep(pause)
    cp.create_nodes(1, cpu="8", labels=pool, prefix=f"{scheduler}-large-")
    assert cp.wait_bound(big, namespace).startswith(f"{scheduler}-large-")
    cp.api.patch(
        f"/api/v1/namespaces/{namespace}/pods/{gated}", {"spec": {"schedulingGates": None}}
    )
    cp.wait_bound(gated, namespace)
    time.sleep(1)
    return scrape()


CASES = {
    # the big pod's backoff (1 s, counted in whole seconds) is over: the node's add
    # sends it to activeQ
    "node-after-backoff": (3.0, {("active", "NodeAdd"): 1.0}),
    # the node comes while it backs off: backoffQ, from which it is popped at once,
    # activeQ being empty (SchedulerPopFromBackoffQ)
    "node-during-backoff": (0.0, {("backoff", "NodeAdd"): 1.0, ("active", "PopFromBackoffQ"): 1.0}),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_pods_entering_the_queues_are_counted_as_kube_scheduler_counts_them(
    controlplane: ControlPlane, namespace: str, crds: None, case: str
) -> None:
    pause, node_moves = CASES[case]
    kube_name, ks_name = f"kube-{case}", f"ks-{case}"
    cp = controlplane
    kube = cp.start_kube_scheduler(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": kube_name}],
        }
    )
    try:
        theirs = incoming(await call(story, cp, namespace, kube_name, kube.metrics, pause))
    finally:
        kube.stop()

    settings = local_settings(cp.kubeconfig, scheduler_names=[ks_name])
    async with running(settings) as started:
        rt: Runtime = started.runtime

        def scrape() -> str:
            return generate_latest(rt.scheduler.metrics.registry).decode()

        ours = incoming(await call(story, cp, namespace, ks_name, scrape, pause))

    expected = {
        ("active", "UnscheduledPodAdd"): 2.0,
        ("unschedulable", "UnscheduledPodAdd"): 1.0,
        ("unschedulable", "ScheduleAttemptFailure"): 1.0,
        ("active", "TargetPodUpdatePodSchedulingGatesEliminated"): 1.0,
        **node_moves,
    }
    assert theirs == expected, f"kube-scheduler counted {theirs}"
    assert ours == theirs
