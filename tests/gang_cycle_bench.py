"""Time the whole-group cycle in memory: N nodes, G gangs of M identical members.

    python -m tests.gang_cycle_bench --nodes 5000 --gangs 1000 --members 3
    python -m tests.gang_cycle_bench --nodes 1000 --gangs 1 --members 1024 [--no-batching]

kube-scheduler's scheduler_perf gang case is 5000 nodes and 1000 gangs of 3. Prints
the mean of ``scheduler_podgroup_scheduling_attempt_duration_seconds`` (scheduled
attempts) and opportunistic batching's hints. CPU-bound: on a shared machine, run it a
few times.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from kubesched.cluster.memory import MemoryCluster
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod


async def bench(nodes: int, gangs: int, members: int, batching: bool) -> str:
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, seed=1, opportunistic_batching=batching)
    handlers = EventHandlers(sched, on_bad_object=lambda *a: None)
    cluster.subscribe(handlers.on_event)
    for i in range(nodes):
        zone = f"zone-{i % 3}"
        node = (
            make_node(f"n{i}")
            .alloc(cpu="4", memory="32Gi")
            .label("topology.kubernetes.io/zone", zone)
        )
        cluster.apply(node.obj())
    for g in range(gangs):
        cluster.apply(
            {
                "apiVersion": "kubesched.dev/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": f"g{g}", "namespace": "default"},
                "spec": {"minMember": members},
            }
        )
        for i in range(members):
            pod = make_pod(f"g{g}-{i}").req(cpu="100m", memory="500Mi")
            cluster.apply(pod.label("kubesched.dev/pod-group", f"g{g}").obj())
    t0 = time.perf_counter()
    await sched.run_until_idle()
    wall = time.perf_counter() - t0
    get = sched.metrics.registry.get_sample_value
    labels = {"result": "scheduled", "profile": "kubesched"}
    n = get("scheduler_podgroup_scheduling_attempt_duration_seconds_count", labels) or 0
    total = get("scheduler_podgroup_scheduling_attempt_duration_seconds_sum", labels) or 0
    hints = get("scheduler_batch_attempts_total", {"profile": "kubesched", "result": "hint_used"})
    return (
        f"{nodes} nodes, {gangs} gangs of {members}: {sched.stats.scheduled} bound in "
        f"{wall:.2f} s; {n:.0f} group attempts, {1000 * total / max(n, 1):.2f} ms each; "
        f"{hints or 0:.0f} batch hints used"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--no-batching", action="store_true")
    a = parser.parse_args()
    print(asyncio.run(bench(a.nodes, a.gangs, a.members, not a.no_batching)))


if __name__ == "__main__":
    main()
