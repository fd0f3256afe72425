"""The three gang APIs on the in-memory cluster: each gang binds all-or-nothing, and the
status computed for each API's shape reads what happened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.api.gangs import STORE_KINDS, GangAPI, gang_key
from kubesched.operator.gang_status import scheduler_plugins_status, upstream_conditions
from kubesched.plugins.coscheduling import Coscheduling
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

NOW = "2026-01-01T00:00:00Z"


def group(api: GangAPI, name: str, n: int) -> dict[str, Any]:
    spec: dict[str, Any]
    if api is GangAPI.UPSTREAM:
        spec = {"schedulingPolicy": {"gang": {"minCount": n}}}
    else:
        spec = {"minMember": n}
    return {
        "apiVersion": api.value,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": spec,
    }


def members(api: GangAPI, name: str, n: int, cpu: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        b = make_pod(f"{name}-{i}").req(cpu=cpu)
        if api is GangAPI.KUBESCHED:
            b = b.label("kubesched.dev/pod-group", name)
        elif api is GangAPI.SCHEDULER_PLUGINS:
            b = b.label("scheduling.x-k8s.io/pod-group", name)
        pod = b.obj()
        if api is GangAPI.UPSTREAM:
            pod["spec"]["schedulingGroup"] = {"podGroupName": name}
        out.append(pod)
    return out


def two_nodes() -> list[dict[str, Any]]:
    return [make_node(f"n{i}").alloc(cpu="4", memory="32Gi").obj() for i in (1, 2)]


def plugin(h: Harness) -> Coscheduling:
    p = h.sched.profiles["kubesched"].framework.chain.permit[-1]
    assert isinstance(p, Coscheduling)
    return p


APIS = [pytest.param(a, id=a.group) for a in GangAPI]


@pytest.mark.parametrize("api", APIS)
async def test_each_api_binds_a_gang_that_fits_whole(api: GangAPI) -> None:
    h = Harness()
    h.apply(*two_nodes(), group(api, "train", 4), *members(api, "train", 4, "2"))
    keys = [f"default/train-{i}" for i in range(4)]
    async with running(h):
        await h.wait_for(lambda: all(h.node_of(k) for k in keys))
    pods = [h.cluster.pod(k) for k in keys]
    obj = h.cluster.get(STORE_KINDS[api], "default", "train")
    assert obj is not None
    if api is GangAPI.SCHEDULER_PLUGINS:
        status = scheduler_plugins_status(obj, 4, [p for p in pods if p])
        # bound, not yet running (no kubelet here): scheduler-plugins says Scheduling
        assert status["phase"] == "Scheduling"
    if api is GangAPI.UPSTREAM:
        (cond,) = upstream_conditions(obj, scheduled=True, unschedulable="", now=NOW) or []
        assert (cond["type"], cond["status"], cond["reason"], cond["observedGeneration"]) == (
            "PodGroupInitiallyScheduled",
            "True",
            "Scheduled",
            1,
        )


@pytest.mark.parametrize("api", APIS)
async def test_each_api_binds_nothing_of_a_gang_that_does_not_fit(api: GangAPI) -> None:
    h = Harness()
    h.apply(*two_nodes(), group(api, "big", 3), *members(api, "big", 3, "3"))
    keys = [f"default/big-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
    assert h.cluster.bindings == []
    report = plugin(h).report("default", "big", api)
    want = f'pod group "{gang_key(api, "default", "big")}": 2/3 members fit; 1 pod: 0/2 nodes'
    assert report is not None and report.blocked.startswith(want)
    obj = h.cluster.get(STORE_KINDS[api], "default", "big")
    assert obj is not None
    if api is GangAPI.UPSTREAM:
        (cond,) = (
            upstream_conditions(obj, scheduled=False, unschedulable=report.blocked, now=NOW) or []
        )
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert cond["message"].startswith(want)


async def test_same_name_in_three_apis_is_three_gangs() -> None:
    h = Harness()
    h.apply(*two_nodes(), *(group(api, "g", 2) for api in GangAPI))
    by_api = {}
    for api, prefix in zip(GangAPI, ("ours", "up", "x"), strict=True):
        pods = members(api, "g", 2, "1")
        for p in pods:
            p["metadata"]["name"] = f"{prefix}-{p['metadata']['name']}"
        by_api[api] = pods
    # Kubernetes' gang "g" gets one member of two: only it waits; the others bind.
    h.apply(*by_api[GangAPI.KUBESCHED], *by_api[GangAPI.SCHEDULER_PLUGINS])
    h.apply(by_api[GangAPI.UPSTREAM][0])
    bound = ["default/ours-g-0", "default/ours-g-1", "default/x-g-0", "default/x-g-1"]
    async with running(h):
        await h.wait_for(lambda: all(h.node_of(k) for k in bound))
        await asyncio.sleep(5)
    # held by PreEnqueue (1 of 2 members) under its own key, not counted with the others
    assert h.node_of("default/up-g-0") is None
    up = plugin(h).report("default", "g", GangAPI.UPSTREAM)
    x = plugin(h).report("default", "g", GangAPI.SCHEDULER_PLUGINS)
    assert up is not None and up.schedule_start is None  # never tried: 1 of 2 exists
    assert x is not None and x.schedule_start is not None


@pytest.mark.parametrize(
    "api", [GangAPI.UPSTREAM, GangAPI.SCHEDULER_PLUGINS], ids=lambda a: a.group
)
async def test_deleting_a_foreign_pod_group_holds_its_pending_members(api: GangAPI) -> None:
    h = Harness()
    pods = members(api, "g", 3, "3")
    h.apply(make_node("n1").alloc(cpu="4", memory="32Gi").obj(), group(api, "g", 3), *pods)
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/g-0"))
        h.cluster.delete(STORE_KINDS[api], "default/g")
        # Back in the queue (at the latest after the 5-minute flush), PreEnqueue holds
        # them: the group is gone, named by its API-qualified key.
        gone = f'pod group "{api.group}/default/g" does not exist'
        await h.wait_for(
            lambda: any(gone in e.message for e in h.cluster.events_for("default/g-0")),
            within=400,
        )
    assert h.cluster.bindings == []


MISMATCH = (
    "all pods in a single pod group should have the same priority as the pod group's "
    "priority, got 100 and 0"
)


def scheduled_condition(h: Harness, key: str) -> tuple[str, str, str]:
    pod = h.cluster.pod(key) or {}
    (c,) = [c for c in pod["status"].get("conditions") or () if c["type"] == "PodScheduled"]
    return c["status"], c["reason"], c["message"]


async def test_a_kubernetes_podgroup_whose_pods_disagree_is_not_tried() -> None:
    # kube-scheduler 1.37's validatePodGroup: a member of priority 100 in a group of
    # priority 0 (no class). None of the group is scheduled, though it would fit; the
    # same gang in our API is scheduled (its priority is the group's or the lowest
    # member's), and a gang of Kubernetes' whose pods agree binds beside it.
    h = Harness()
    up = members(GangAPI.UPSTREAM, "mixed", 2, "1")
    up[1]["spec"]["priority"] = 100
    ours = members(GangAPI.KUBESCHED, "ours", 2, "1")
    ours[1]["spec"]["priority"] = 100
    h.apply(
        *two_nodes(),
        group(GangAPI.UPSTREAM, "mixed", 2),
        group(GangAPI.KUBESCHED, "ours", 2),
        group(GangAPI.UPSTREAM, "fine", 2),
        *up,
        *ours,
        *members(GangAPI.UPSTREAM, "fine", 2, "1"),
    )
    mixed = ["default/mixed-0", "default/mixed-1"]
    bound = ["default/ours-0", "default/ours-1", "default/fine-0", "default/fine-1"]
    async with running(h):
        await h.wait_for(
            lambda: (
                all(h.node_of(k) for k in bound)
                and all("FailedScheduling" in h.reasons(k) for k in mixed)
            )
        )
    assert not any(h.node_of(k) for k in mixed)
    for key in mixed:
        assert scheduled_condition(h, key) == ("False", "SchedulerError", MISMATCH)
        (event,) = [e for e in h.cluster.events_for(key) if e.reason == "FailedScheduling"][:1]
        assert (event.type, event.message) == ("Warning", MISMATCH)
    report = plugin(h).report("default", "mixed", GangAPI.UPSTREAM)
    assert report is not None and (report.blocked, report.error) == (MISMATCH, True)
    obj = h.cluster.get(STORE_KINDS[GangAPI.UPSTREAM], "default", "mixed")
    assert obj is not None
    (cond,) = (
        upstream_conditions(
            obj, scheduled=False, unschedulable=report.blocked, now=NOW, error=report.error
        )
        or []
    )
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "SchedulerError",
        MISMATCH,
    )


async def test_a_spare_member_of_another_priority_fails_alone() -> None:
    # The gang holds its minimum; a third member of priority 5 is checked as kube-scheduler
    # checks the group (its pod, then the pods on nodes) and fails with the error.
    h = Harness()
    h.apply(*two_nodes(), group(GangAPI.UPSTREAM, "g", 2), *members(GangAPI.UPSTREAM, "g", 3, "1"))
    async with running(h):
        await h.wait_for(lambda: all(h.node_of(f"default/g-{i}") for i in range(3)))
        spare = members(GangAPI.UPSTREAM, "g", 4, "1")[3]
        spare["spec"]["priority"] = 5
        h.apply(spare)
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/g-3"))
    assert h.node_of("default/g-3") is None
    assert scheduled_condition(h, "default/g-3") == (
        "False",
        "SchedulerError",
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 5 and 0",
    )


async def test_an_error_that_stays_is_logged_once_per_pod(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The group backs off and is tried again; each attempt records its event, the log
    # says it once (then at DEBUG).
    h = Harness()
    up = members(GangAPI.UPSTREAM, "mixed", 2, "1")
    up[1]["spec"]["priority"] = 100
    h.apply(*two_nodes(), group(GangAPI.UPSTREAM, "mixed", 2), *up)
    with caplog.at_level("DEBUG", logger="kubesched.scheduler"):
        async with running(h):
            await h.wait_for(lambda: h.reasons("default/mixed-0").count("FailedScheduling") >= 3)
    lines = [
        r
        for r in caplog.records
        if r.name == "kubesched.scheduler" and r.getMessage().startswith("error scheduling pod")
    ]
    warned = [r.getMessage() for r in lines if r.levelname == "WARNING"]
    assert sorted(warned) == [
        f"error scheduling pod default/mixed-{i}: {MISMATCH}" for i in range(2)
    ]
    assert sum(r.levelname == "DEBUG" for r in lines) >= 2
