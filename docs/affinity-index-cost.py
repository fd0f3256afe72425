"""What InterPodAffinity's counts cost when the node set changes: a node added, removed
or relabelled in a cluster of many bound pods (docs/benchmarks.md, "What bounds each
number"; kubesched.plugins.inter_pod_affinity.index).

    python docs/affinity-index-cost.py --nodes 1000 --pods 20000 --changes 20

A cache of ``--nodes`` nodes in three zones holds ``--pods`` bound pods in ten label
groups, a tenth of them with a preferred zone anti-affinity term to their own group.
The script times the index's first count over the snapshot, then ``--changes`` times
each: a node joins, the node leaves, a node's zone label changes, each followed by the
``sync`` a scheduling cycle makes. To compare two trees, run it with
``PYTHONPATH=<tree>/operator``. Not a test: read the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from kubesched.backend.cache import Cache
from kubesched.framework.types import Node, Pod
from kubesched.plugins.inter_pod_affinity.index import AffinityIndex
from kubesched.plugins.inter_pod_affinity.terms import TermCache

ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str) -> Node:
    return Node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "uid": name, "labels": {ZONE: zone}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        }
    )


def pod(i: int, node_name: str) -> Pod:
    group = f"g{i % 10}"
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "10m"}}}],
    }
    if i % 10 == 0:
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"group": group}},
                            "topologyKey": ZONE,
                        },
                    }
                ]
            }
        }
    return Pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"p{i}",
                "namespace": "default",
                "uid": f"u{i}",
                "labels": {"group": group},
            },
            "spec": spec,
            "status": {"phase": "Running"},
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--changes", type=int, default=20)
    args = ap.parse_args()

    cache = Cache()
    for i in range(args.nodes):
        cache.add_node(node(f"n{i}", f"z{i % 3}"))
    for i in range(args.pods):
        cache.add_pod(pod(i, f"n{i % args.nodes}"))
    index = AffinityIndex(TermCache().lenient)
    t = time.perf_counter()
    index.sync(cache.update_snapshot())
    print(
        f"{args.pods} pods on {args.nodes} nodes; first count: {1000 * (time.perf_counter() - t):.1f} ms"
    )

    def timed(change: Callable[[], None]) -> float:
        change()
        snap = cache.update_snapshot()
        t = time.perf_counter()
        index.sync(snap)
        return time.perf_counter() - t

    added: list[float] = []
    removed: list[float] = []
    relabelled: list[float] = []
    for k in range(args.changes):
        name = f"new{k}"
        added.append(timed(lambda: cache.add_node(node(name, "z1"))))  # noqa: B023
        removed.append(timed(lambda: cache.remove_node(name)))  # noqa: B023
        victim = cache.node_info(f"n{k % args.nodes}")
        assert victim is not None and victim.node is not None
        old = victim.node
        moved = node(old.name, f"z{(k + 1) % 3}x")
        relabelled.append(timed(lambda: cache.update_node(old, moved)))  # noqa: B023
    for what, ts in (("added", added), ("removed", removed), ("relabelled", relabelled)):
        print(f"a node {what}: the next sync, median {1000 * statistics.median(ts):.2f} ms")


if __name__ == "__main__":
    main()
