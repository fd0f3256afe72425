"""Gang topology on the real kube-apiserver (issue 14): a kubesched.dev PodGroup with
``spec.schedulingConstraints.topology: [{key, mode}]`` keeps its members in one domain
of a node label (``Required``), or spreads them over as few domains as it can when no
single domain holds them (``Preferred``). Each test ends with kubesched's cache equal to
the API.

Each test labels its nodes with a rack key of its own (``example.com/rack-<tag>``): the
control plane is shared by the session, so another test's racks would otherwise add
domains (and placements to the messages) here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.e2e.cachecheck import assert_cache_matches_api
from tests.e2e.support import call, eventually
from tests.e2e.test_gang_e2e import (
    apply,
    bound,
    members,
    pod_group,
    pool,
    read_group,
    scheduled_condition,
)

pytestmark = pytest.mark.timeout(120)

JSON = dict[str, Any]


def racks(cp: ControlPlane, key: str) -> dict[str, str]:
    """Node name -> its value of the rack label ``key``."""
    nodes = cp.api.list("v1", "Node", labelSelector=key)
    return {n["metadata"]["name"]: n["metadata"]["labels"][key] for n in nodes}


def topology(key: str, mode: str) -> JSON:
    return {"topology": [{"key": key, "mode": mode}]}


async def make_rack(
    cp: ControlPlane, sel: dict[str, str], key: str, rack: str, n: int, cpu: str
) -> list[str]:
    tag = next(iter(sel.values()))
    names: list[str] = await call(
        cp.create_nodes, n, cpu=cpu, labels={**sel, key: rack}, prefix=f"topo-{tag}-{rack}-"
    )
    return names


async def wait_scheduled(cp: ControlPlane, namespace: str, name: str, n: int) -> JSON:
    def scheduled() -> JSON | None:
        g = read_group(cp, namespace, name)
        st = g.get("status") or {}
        return g if st.get("phase") == "Scheduled" and st["counts"]["bound"] == n else None

    group: JSON = await eventually(scheduled, what=f"PodGroup {name} Scheduled, {n} bound")
    return group


async def test_required_topology_binds_the_gang_in_one_rack_or_not_at_all(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
) -> None:
    cp, sel = controlplane, pool()
    key = f"example.com/rack-{next(iter(sel.values()))}"
    # r1: 2 x 2 cpu (room for two 2-cpu members); r2: 2 x 4 cpu (room for four).
    await make_rack(cp, sel, key, "r1", 2, "2")
    await make_rack(cp, sel, key, "r2", 2, "4")
    rack_of = await call(racks, cp, key)
    assert sorted(Counter(rack_of.values()).items()) == [("r1", 2), ("r2", 2)]

    # Three 2-cpu members: whole only in r2 (spread over both racks they would fit too).
    big = pod_group("big", 3, schedulingConstraints=topology(key, "Required"))
    await call(apply, cp, namespace, big, *members("big", 3, sel, cpu="2"))
    await eventually(lambda: len(bound(cp, namespace, "big")) == 3, what="3 of big bound")
    assert [rack_of[n] for n in await call(bound, cp, namespace, "big")] == ["r2"] * 3
    group = await wait_scheduled(cp, namespace, "big", 3)
    cond = scheduled_condition(group)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Scheduled",
        "3/3 members bound",
    )

    # Left: 4 cpu in r1, 2 cpu in r2. Three more 2-cpu members would fit over both
    # racks, in none alone: the Required gang binds nothing and says why.
    late = pod_group("late", 3, schedulingConstraints=topology(key, "Required"))
    await call(apply, cp, namespace, late, *members("late", 3, sel, cpu="2"))

    def unschedulable() -> JSON | None:
        c = scheduled_condition(read_group(cp, namespace, "late"))
        return c if c.get("reason") == "Unschedulable" else None

    cond = await eventually(unschedulable, what="late: PodGroupScheduled=False, Unschedulable")
    assert cond["status"] == "False"
    prefix = (
        f'pod group "{namespace}/late": 0/2 placements are available, first placement status: '
        f'{key}="r1": 2/3 members fit; 1 pod: '
    )
    assert cond["message"].startswith(prefix), cond["message"]
    assert "Insufficient cpu" in cond["message"]
    group = await call(read_group, cp, namespace, "late")
    assert group["status"]["phase"] == "Pending"
    assert group["status"]["message"] == cond["message"]
    assert group["status"]["counts"]["pending"] == 3
    for i in range(3):
        pod = await call(cp.api.read, "v1", "Pod", f"late-{i}", namespace)
        conds = (pod.get("status") or {}).get("conditions") or []
        pc: JSON = next((c for c in conds if c.get("type") == "PodScheduled"), {})
        assert (pc.get("status"), pc.get("reason")) == ("False", "Unschedulable")
        assert pc.get("message") == cond["message"]
    assert await call(bound, cp, namespace, "late") == []
    # The first gang is untouched.
    assert [rack_of[n] for n in await call(bound, cp, namespace, "big")] == ["r2"] * 3

    url = f"http://127.0.0.1:{kubesched.port}"
    await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)


async def test_preferred_topology_spreads_a_gang_over_the_fewest_racks(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
) -> None:
    cp, sel = controlplane, pool()
    key = f"example.com/rack-{next(iter(sel.values()))}"
    # Three racks of one 4-cpu node, room for two 2-cpu members each. Four members fit
    # in no single rack, in two of them whole; spreading by free room alone (as without
    # a topology) puts them on all three.
    for rack in ("r1", "r2", "r3"):
        await make_rack(cp, sel, key, rack, 1, "4")
    rack_of = await call(racks, cp, key)
    assert sorted(Counter(rack_of.values()).items()) == [("r1", 1), ("r2", 1), ("r3", 1)]

    wide = pod_group("wide", 4, schedulingConstraints=topology(key, "Preferred"))
    await call(apply, cp, namespace, wide, *members("wide", 4, sel, cpu="2"))
    await eventually(lambda: len(bound(cp, namespace, "wide")) == 4, what="4 of wide bound")
    used = Counter(rack_of[n] for n in await call(bound, cp, namespace, "wide"))
    assert sorted(used.values()) == [2, 2], f"not the fewest racks (2): {used}"
    group = await wait_scheduled(cp, namespace, "wide", 4)
    cond = scheduled_condition(group)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Scheduled",
        "4/4 members bound",
    )

    url = f"http://127.0.0.1:{kubesched.port}"
    await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)
