"""Properties of the whole-group cycle over random clusters, profiles and gangs.

Each example: nodes of random CPU in two zones, a LeastAllocated or MostAllocated
profile, gangs of identical members (random size, minimum, spares, sometimes a Required
zone) and pods outside gangs, all created at once and scheduled to quiescence in
virtual time. Members request only CPU and are identical within a gang, so whether a
gang fits in what is left is a count (a node takes ``free // cpu`` members, whatever the
order), which makes these checkable:

- never a partial bind: a gang has none or at least its minimum of members bound;
- never a deadlock or starvation: a gang still pending does not fit in what is left
  (in any zone, for a zoned gang), nor does a pending pod outside gangs; with room
  only decreasing, a gang that fits alone in the end would have fit when it was tried;
- a Required zone is honoured by every bound member.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.profile import ProfileSpec
from kubesched.cluster.memory import MemoryCluster
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.integration.bad_input import in_fresh_loop

ZONE = "topology.kubernetes.io/zone"
LABEL = "kubesched.dev/pod-group"


@dataclass(frozen=True)
class GangCase:
    name: str
    cpu: int
    min_member: int
    spares: int
    zoned: bool


@dataclass(frozen=True)
class Case:
    nodes: list[int]
    """CPU of each node; node i is in zone ``z{i % 2}``."""
    strategy: str
    gangs: list[GangCase]
    solos: list[int]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=5))
    gangs = [
        GangCase(
            f"g{i}",
            draw(st.integers(1, 4)),
            draw(st.integers(1, 5)),
            draw(st.integers(0, 2)),
            draw(st.booleans()),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    solos = draw(st.lists(st.integers(1, 3), max_size=3))
    return Case(nodes, draw(st.sampled_from(["LeastAllocated", "MostAllocated"])), gangs, solos)


def profile(strategy: str) -> ProfileSpec:
    return ProfileSpec.model_validate(
        {
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}
            ]
        }
    )


async def run(case: Case) -> None:
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, profiles=[profile(case.strategy)], seed=0)
    handlers = EventHandlers(sched, on_bad_object=lambda *a: None)
    cluster.subscribe(handlers.on_event)
    for i, cpu in enumerate(case.nodes):
        node = make_node(f"n{i}").alloc(cpu=str(cpu), memory="32Gi").label(ZONE, f"z{i % 2}")
        cluster.apply(node.obj())
    for g in case.gangs:
        spec: dict[str, object] = {"minMember": g.min_member}
        if g.zoned:
            spec["schedulingConstraints"] = {"topology": [{"key": ZONE}]}
        cluster.apply(
            {
                "apiVersion": "kubesched.dev/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": g.name, "namespace": "default"},
                "spec": spec,
            }
        )
        for j in range(g.min_member + g.spares):
            cluster.apply(make_pod(f"{g.name}-{j}").req(cpu=str(g.cpu)).label(LABEL, g.name).obj())
    for j, cpu in enumerate(case.solos):
        cluster.apply(make_pod(f"solo-{j}").req(cpu=str(cpu)).obj())
    await asyncio.wait_for(sched.run_until_idle(), timeout=3600)

    free = {f"n{i}": cpu for i, cpu in enumerate(case.nodes)}
    zone = {f"n{i}": f"z{i % 2}" for i in range(len(case.nodes))}
    placed: dict[str, str] = {}
    for pod in cluster.list("Pod"):
        meta, spec_ = pod["metadata"], pod["spec"]
        node = spec_.get("nodeName")
        if node:
            placed[meta["name"]] = node
            cpu = int(spec_["containers"][0]["resources"]["requests"]["cpu"])
            free[node] -= cpu
    assert all(v >= 0 for v in free.values()), free

    def room(cpu: int, zone_of: str | None = None) -> int:
        return sum(f // cpu for n, f in free.items() if zone_of is None or zone[n] == zone_of)

    for g in case.gangs:
        names = [f"{g.name}-{j}" for j in range(g.min_member + g.spares)]
        on = [placed[n] for n in names if n in placed]
        assert not on or len(on) >= g.min_member, f"{g.name}: partial bind {on}"
        if g.zoned and on:
            assert len({zone[n] for n in on}) == 1, f"{g.name}: zones {on}"
        if not on:
            fits = max(room(g.cpu, z) for z in ("z0", "z1")) if g.zoned else room(g.cpu)
            assert fits < g.min_member, f"{g.name} pending though {fits} members fit now"
    for j, cpu in enumerate(case.solos):
        if f"solo-{j}" not in placed:
            assert room(cpu) == 0, f"solo-{j} ({cpu} cpu) pending though a node has room"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases())
def test_gangs_bind_whole_or_not_at_all_and_nothing_starves(case: Case) -> None:
    in_fresh_loop(run(case))
