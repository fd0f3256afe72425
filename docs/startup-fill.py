"""The initial sync's fill, alone: the nodes and the pending pods of a start-up listing
put into the cache and the queue of a real ``Runtime``, with no API server and no
imports in the timed window (docs/benchmarks.md, "Start-up").

    python docs/startup-fill.py --pods 5000 --nodes 1000 --runs 9

The objects are those of docs/startup-harness.py, with what the API server adds to a
created pod (uid, resourceVersion, the default tolerations, ...). Each run builds a new
``Runtime`` and hands it the objects as the prefetch would (pages of 500 pods); the
informers' first listing then delivers them through the same router, event handlers,
queue and gang index as ``kubesched run``, the collector off as there, and holds the
plain pending pods as it does (``kubesched.scheduler.held_pods``): ``pods`` is the time
to the sync (the listing stored, the first cycle's pod queued), ``held`` the rest queued
after the first cycle. The first run (first use of every path) is left out of the
medians. Not a test: read the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.prefetch import Page
from kubesched.operator.run import Runtime
from kubesched.operator.settings import Settings

_spec = importlib.util.spec_from_file_location(
    "startup_harness", Path(__file__).with_name("startup-harness.py")
)
assert _spec is not None and _spec.loader is not None
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def pods(n: int, scheduler: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        p = harness.pod(i, scheduler)
        p["metadata"].update(
            uid=f"pod-{i}",
            resourceVersion=str(10_000 + i),
            creationTimestamp="2026-12-05T10:00:00Z",
        )
        p["spec"].update(
            restartPolicy="Always",
            dnsPolicy="ClusterFirst",
            serviceAccountName="default",
            priority=0,
            preemptionPolicy="PreemptLowerPriority",
            tolerations=[
                {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                for k in (NOT_READY, UNREACHABLE)
            ],
        )
        p["status"] = {"phase": "Pending", "qosClass": "Burstable"}
        out.append(p)
    return out


def nodes(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        node = harness.node(i)
        node["metadata"].update(uid=f"node-{i}", resourceVersion=str(100 + i))
        out.append(node)
    return out


class Listed:
    """The prefetch's pages, as ``Prefetch.take`` hands them over."""

    def __init__(self, pages: dict[str, list[Page]]) -> None:
        self.pages = pages

    async def take(self, kind: str) -> list[Page] | None:
        return self.pages.pop(kind, None)


async def one(n_pods: int, n_nodes: int, settings: Settings) -> tuple[float, float, float]:
    """(nodes s, pods s, held s) of one fill: the pods' listing up to the sync, and the
    held pods queued after the first cycle (kubesched.scheduler.held_pods)."""
    cfg = k8s_client.Configuration()
    cfg.host = "https://127.0.0.1:1"  # never reached: the listing is handed over
    scheduler = settings.scheduler_names[0]
    listed = pods(n_pods, scheduler)
    pages = {
        "Pod": [(listed[i : i + 500], "1") for i in range(0, len(listed), 500)],
        "Node": [(nodes(n_nodes), "1")],
    }
    rt = Runtime(settings, cfg, Listed(pages))  # type: ignore[arg-type]
    informers = {i.kind: i for i in rt.informers}
    gc.collect()
    gc.disable()
    try:
        rt.router.hold_pending()  # as run's _start does
        t0 = time.perf_counter()
        await informers["Node"].relist()
        t1 = time.perf_counter()
        await informers["Pod"].relist()
        rt.scheduler.admit_held_heads()  # the sync: the first cycle's pod queued
        t2 = time.perf_counter()
        rt.scheduler.release_held()  # after the first cycle: the rest
        t3 = time.perf_counter()
    finally:
        gc.enable()
    queued = rt.scheduler.queues.queue(scheduler)
    assert queued is not None and queued.pending_counts()["active"] == n_pods
    return t1 - t0, t2 - t1, t3 - t2


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pods", type=int, default=5000)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--runs", type=int, default=9)
    args = p.parse_args()
    settings = Settings.load({})
    runs = [await one(args.pods, args.nodes, settings) for _ in range(args.runs + 1)][1:]
    for name, i in (("nodes", 0), ("pods", 1), ("held", 2)):
        ms = [r[i] * 1000 for r in runs]
        print(
            f"{name:6s} median {statistics.median(ms):6.1f} ms  min {min(ms):6.1f}  max {max(ms):6.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
