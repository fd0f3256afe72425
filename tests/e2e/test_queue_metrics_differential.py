"""kube-scheduler's queue and attempt metrics against the real kube-scheduler: the same
story played to each on the shared control plane, and the metrics compared twice, while
a pod waits and at the end.

The story: a pod that fits, one too big for the only node of its pool, a gated one, and
one whose claim does not exist (rejected at PreFilter every time: it is still pending
at the end); a node that fits the big pod joins the pool, once its backoff is over or
while it backs off; then the gated pod's gate is removed. ``scheduler_queue_incoming_pods_total`` names
every move by what caused it (the pod's add, the failed attempt, the node's add, the
pod's own update); ``scheduler_pending_pods`` and ``scheduler_unschedulable_pods`` say
where the pods wait; ``scheduler_schedule_attempts_total`` and
``scheduler_pod_scheduling_attempts`` count the attempts, and the extension points'
duration counts say how often each ran, with what status.
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

COMPARED = (
    "scheduler_queue_incoming_pods_total",
    "scheduler_pending_pods",
    "scheduler_unschedulable_pods",
    "scheduler_schedule_attempts_total",
    "scheduler_pod_scheduling_attempts_count",
    "scheduler_pod_scheduling_attempts_sum",
    "scheduler_pod_scheduling_sli_duration_seconds_count",
    "scheduler_scheduling_attempt_duration_seconds_count",
    "scheduler_framework_extension_point_duration_seconds_count",
    "scheduler_preemption_attempts_total",
)
_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})? ([0-9.e+]+)$")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str, profile: str) -> Samples:
    """The non-zero samples of :data:`COMPARED` in Prometheus text, keyed by name and
    labels; the profile's name (each scheduler's own) reads ``P``."""
    out: Samples = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) not in COMPARED or not float(m.group(3)):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if labels.get("extension_point") == "Sign":
            continue  # kubesched signs a pod as its cycle begins (docs/differences.md)
        if labels.get("profile") == profile:
            labels["profile"] = "P"
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(3))
    return out


def story(
    cp: ControlPlane, namespace: str, scheduler: str, scrape: Callable[[], str], pause: float
) -> tuple[Samples, Samples]:
    """Play the story to ``scheduler`` (already running), the big pod's node ``pause``
    seconds after its failure; return its metrics as the big pod waits, and at the end.
    Its pods and nodes are deleted after it: the next scheduler meets the same cluster."""
    nodes: list[str] = []
    pods: list[str] = []
    try:
        return _play(cp, namespace, scheduler, scrape, pause, nodes, pods)
    finally:
        for pod in pods:
            cp.api.delete(f"/api/v1/namespaces/{namespace}/pods/{pod}", gracePeriodSeconds="0")
        for node in nodes:
            cp.api.delete(f"/api/v1/nodes/{node}")


def _play(
    cp: ControlPlane,
    namespace: str,
    scheduler: str,
    scrape: Callable[[], str],
    pause: float,
    nodes: list[str],
    pods: list[str],
) -> tuple[Samples, Samples]:
    pool = {"e2e.kubesched.dev/pool": f"incoming-{uuid.uuid4().hex[:8]}"}
    spec = {"nodeSelector": pool}
    nodes += cp.create_nodes(1, cpu="1", labels=pool, prefix=f"{scheduler}-small-")
    time.sleep(1)  # the node in the scheduler's cache before the pods come
    common = {"namespace": namespace, "scheduler_name": scheduler, "spec": spec}
    names = ("fits", "big", "gated", "claimless")
    fits, big, gated, claimless = (f"{scheduler}-{name}" for name in names)
    pods += [fits, big, gated, claimless]
    cp.create_pod(fits, cpu="500m", **common)  # type: ignore[arg-type]
    cp.create_pod(big, cpu="4", **common)  # type: ignore[arg-type]
    held = {**spec, "schedulingGates": [{"name": "e2e.kubesched.dev/wait"}]}
    cp.create_pod(gated, namespace=namespace, scheduler_name=scheduler, spec=held)
    # its claim never comes: rejected at PreFilter (VolumeRestrictions) every time
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": f"{claimless}-none"}}
    cp.create_pod(
        claimless,
        namespace=namespace,
        scheduler_name=scheduler,
        spec={**spec, "volumes": [volume]},
    )
    cp.wait_bound(fits, namespace)

    def big_failed() -> bool:
        pod = cp.api.read("v1", "Pod", big, namespace)
        return any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in pod["status"].get("conditions") or ()
        )

    def settled(now: Samples) -> bool:
        # every first attempt counted (fits, big, claimless) and none still waiting in
        # activeQ. The API server shows the bind, and the big pod's condition, before
        # the scheduler has counted every attempt: on a loaded machine the claimless
        # pod's attempt can come after both
        attempts = sum(
            value for (name, _), value in now.items() if name == "scheduler_schedule_attempts_total"
        )
        active = any(
            name == "scheduler_pending_pods" and ("queue", "active") in labels
            for name, labels in now
        )
        return attempts >= 3 and not active

    deadline = time.monotonic() + 30
    while not (big_failed() and settled(waiting := samples(scrape(), scheduler))):
        assert time.monotonic() < deadline, "the big pod was never reported unschedulable"
        time.sleep(0.1)
    time.sleep(pause)
    nodes += cp.create_nodes(1, cpu="8", labels=pool, prefix=f"{scheduler}-large-")
    assert cp.wait_bound(big, namespace).startswith(f"{scheduler}-large-")
    cp.api.patch(
        f"/api/v1/namespaces/{namespace}/pods/{gated}", {"spec": {"schedulingGates": None}}
    )
    cp.wait_bound(gated, namespace)
    time.sleep(1)
    return waiting, samples(scrape(), scheduler)


def incoming(s: Samples) -> dict[tuple[str, str], float]:
    """scheduler_queue_incoming_pods_total's (queue, event) -> count."""
    return {
        (dict(labels)["queue"], dict(labels)["event"]): v
        for (name, labels), v in s.items()
        if name == "scheduler_queue_incoming_pods_total"
    }


CASES = {
    # the big and claimless pods' backoff (1 s, counted in whole seconds) is over: the
    # node's add sends them to activeQ
    "node-after-backoff": (3.0, {("active", "NodeAdd"): 2.0}),
    # the node comes while they back off: backoffQ, from which each is popped at once,
    # activeQ being empty (SchedulerPopFromBackoffQ)
    "node-during-backoff": (0.0, {("backoff", "NodeAdd"): 2.0, ("active", "PopFromBackoffQ"): 2.0}),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_queue_and_attempt_metrics_read_as_kube_schedulers(
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
        theirs = await call(story, cp, namespace, kube_name, kube.metrics, pause)
    finally:
        kube.stop()

    settings = local_settings(cp.kubeconfig, scheduler_names=[ks_name])
    async with running(settings) as started:
        rt: Runtime = started.runtime

        def scrape() -> str:
            return generate_latest(rt.scheduler.metrics.registry).decode()

        ours = await call(story, cp, namespace, ks_name, scrape, pause)

    expected = {
        ("active", "UnscheduledPodAdd"): 3.0,
        ("unschedulable", "UnscheduledPodAdd"): 1.0,
        # the big pod and the claimless one, which the node's add moves too and fails
        # again
        ("unschedulable", "ScheduleAttemptFailure"): 3.0,
        ("active", "TargetPodUpdatePodSchedulingGatesEliminated"): 1.0,
        **node_moves,
    }
    assert incoming(theirs[1]) == expected, f"kube-scheduler counted {incoming(theirs[1])}"
    waiting = {(name, dict(labels).get("queue")) for name, labels in theirs[0]}
    assert ("scheduler_pending_pods", "gated") in waiting, theirs[0]
    assert ("scheduler_pending_pods", "unschedulable") in waiting, theirs[0]
    for moment, mine, kubes in (
        ("as the big pod waits", *_at(ours, theirs, 0)),
        ("at the end", *_at(ours, theirs, 1)),
    ):
        assert mine == kubes, (
            f"{moment}: kubesched's own {_only(mine, kubes)}, kube's {_only(kubes, mine)}"
        )


def _at(
    ours: tuple[Samples, Samples], theirs: tuple[Samples, Samples], i: int
) -> tuple[Samples, Samples]:
    return ours[i], theirs[i]


def _only(a: Samples, b: Samples) -> dict[str, float]:
    """The samples of ``a`` that ``b`` lacks or has another value for, readable."""
    return {
        f"{name}{{{','.join(f'{k}={v}' for k, v in sorted(labels))}}}": value
        for (name, labels), value in a.items()
        if b.get((name, labels)) != value
    }
