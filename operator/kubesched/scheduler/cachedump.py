"""The scheduler's cache and queues as plain JSON-able data (``GET /debug/cache``).

In the spirit of kube-scheduler's cache dumper (SIGUSR2): the nodes the cache knows
(name, unschedulable, allocatable, requested, the pods on each), the pods assumed and
not yet confirmed by the API server, and the pods waiting in the queues with their pool
and last failure reason. Tests compare it to the API server
(``tests/e2e/cachecheck.py``); an operator reads it when a pod seems lost.

Only names, uids, resource quantities and scheduling messages leave here: never a
whole object (labels, annotations, env, volumes may carry secrets).
"""

from __future__ import annotations

from typing import Any

from kubesched.framework.resources import Resource
from kubesched.scheduler.scheduler import Scheduler

__all__ = ["cache_dump", "queued_pods", "resource_dict"]


def resource_dict(r: Resource) -> dict[str, Any]:
    """kube-scheduler's Resource fields: milliCPU, memory, ephemeralStorage, pods, scalars."""
    out: dict[str, Any] = {
        "milliCPU": r.milli_cpu,
        "memory": r.memory,
        "ephemeralStorage": r.ephemeral_storage,
        "pods": r.allowed_pods,
    }
    if r.scalar:
        out["scalarResources"] = dict(sorted(r.scalar.items()))
    return out


def cache_dump(scheduler: Scheduler) -> dict[str, Any]:
    """What ``scheduler``'s cache and queues hold now."""
    cache = scheduler.cache
    assumed_uids = {pod.uid for pod, _ in cache.assumed_pods()}
    nodes: list[dict[str, Any]] = []
    for ni in sorted(cache.node_infos(), key=lambda ni: ni.name):
        nodes.append(
            {
                "name": ni.name,
                # False: a NodeInfo kept for pods still bound to a deleted node.
                "present": ni.node is not None,
                "unschedulable": bool(ni.node is not None and ni.node.unschedulable),
                "allocatable": resource_dict(ni.allocatable),
                "requested": resource_dict(ni.requested),
                "pods": sorted(
                    (
                        {"pod": p.key, "uid": p.uid, "assumed": p.uid in assumed_uids}
                        for p in ni.pods
                    ),
                    key=lambda d: str(d["pod"]),
                ),
            }
        )
    assumed = sorted(
        (
            {"pod": p.key, "uid": p.uid, "node": p.node_name, "bindingFinished": finished}
            for p, finished in cache.assumed_pods()
        ),
        key=lambda d: str(d["pod"]),
    )
    pending, in_flight = queued_pods(scheduler)
    return {
        "nodes": nodes,
        "assumed": assumed,
        "pending": pending,
        "inFlight": in_flight,
        "counts": {
            "nodes": cache.node_count(),
            "pods": cache.pod_count(),
            "assumed": len(assumed),
            "pending": len(pending),
        },
    }


def queued_pods(scheduler: Scheduler) -> tuple[list[dict[str, Any]], list[str]]:
    """The pods in the queues (pool, attempts, last reason), by pool and name, and the
    uids of those in flight: the queue half of :func:`cache_dump`, without the nodes."""
    pending: list[dict[str, Any]] = []
    in_flight: list[str] = []
    for profile, q in sorted(scheduler.queues.queues().items()):
        for qpi, pool in q.pending_pods():
            pod = qpi.pod
            outcome = scheduler.stats.outcomes.get(pod.uid)
            reason = qpi.message or (outcome.message if outcome is not None else "")
            if qpi.gated and not reason:
                reason = f"gated by {qpi.gating_plugin}" if qpi.gating_plugin else "gated"
            pending.append(
                {
                    "pod": pod.key,
                    "uid": pod.uid,
                    "profile": profile,
                    "pool": pool,
                    "attempts": qpi.attempts,
                    "reason": reason,
                    "unschedulablePlugins": sorted(qpi.unschedulable_plugins),
                }
            )
        in_flight += q.in_flight()
    pending.sort(key=lambda d: (str(d["pool"]), str(d["pod"])))
    return pending, sorted(in_flight)
