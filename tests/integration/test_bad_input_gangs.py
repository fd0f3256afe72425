"""Bad gang input on a running scheduler (issue 14), Kubernetes' gang API on the
in-memory cluster, in virtual time: a minimum larger than the members ever created, a
Workload without the named template, a pod naming a missing PodGroup, a topology key no
node carries, a gang larger than the cluster.

Each: nothing of the gang is bound, its members stay pending and say why (a
FailedScheduling event; a rejected group also the PodScheduled=False condition), the
PodGroup's status (``PodGroupInitiallyScheduled``, as the status writer computes it)
says why once an attempt was made, and the loop keeps scheduling other pods.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.api.gangs import STORE_KINDS, GangAPI
from kubesched.operator.podgroup_handlers import PodGroupStatusWriter
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

UP = "scheduling.k8s.io/v1beta1"
GROUP = 'pod group "scheduling.k8s.io/default/g"'


def workload(*templates: str) -> dict[str, Any]:
    return {
        "apiVersion": UP,
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": "default"},
        "spec": {
            "podGroupTemplates": [
                {"name": t, "schedulingPolicy": {"gang": {"minCount": 2}}} for t in templates
            ]
        },
    }


def pod_group(
    min_count: int | None, *, template: str | None = None, topology: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if min_count is not None:
        spec["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    if template is not None:
        spec["workloadRef"] = {"workloadName": "job", "templateName": template}
    if topology is not None:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {
        "apiVersion": UP,
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "generation": 1, "uid": "uid-g"},
        "spec": spec,
    }


def members(n: int, cpu: str = "1") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        pod = make_pod(f"g-{i}").req(cpu=cpu).obj()
        pod["spec"]["schedulingGroup"] = {"podGroupName": "g"}
        out.append(pod)
    return out


#: case -> (objects, the member's event message (a prefix), the PodGroup's condition
#: message (a prefix) or None where no attempt is made, so kube-scheduler writes none)
CASES: dict[str, tuple[list[dict[str, Any]], str, str | None]] = {
    "minimum larger than the members ever created": (
        [pod_group(5), *members(3)],
        "",  # held by PreEnqueue as kube-scheduler does: no event, no condition
        None,
    ),
    "workload without the named template": (
        [workload("workers"), pod_group(None, template="ps"), *members(2)],
        "PodGroup scheduling.k8s.io/default/g is invalid: spec.workloadRef.templateName: "
        'Workload "default/job" has no podGroupTemplate named "ps" (it has: "workers")',
        "PodGroup scheduling.k8s.io/default/g is invalid: spec.workloadRef.templateName",
    ),
    "pod naming a missing pod group": (
        members(2),
        f"{GROUP} does not exist; waiting for it to be created",
        None,
    ),
    "topology key no node carries": (
        [pod_group(2, topology="example.com/rack"), *members(2)],
        f'{GROUP}: no node has the topology label "example.com/rack"',
        f'{GROUP}: no node has the topology label "example.com/rack"',
    ),
    "gang larger than the cluster": (
        [pod_group(4), *members(4, cpu="3")],
        f"{GROUP}: 2/4 members fit; 2 pods: 0/2 nodes are available: 2 Insufficient cpu.",
        f"{GROUP}: 2/4 members fit",
    ),
}

#: Group attempts a gang that cannot fit may make in the 20 s it is watched: the first,
#: and at most a few backoff retries (1 s doubling). More is a busy loop.
MAX_ATTEMPTS = 5


def attempts(h: Harness, key: str) -> int:
    return h.reasons(key).count("FailedScheduling")


async def check(case: str, *, arrive_while_running: bool) -> None:
    objects, event, condition = CASES[case]
    h = Harness()
    h.apply(*(make_node(f"n{i}").alloc(cpu="4", memory="16Gi").obj() for i in (1, 2)))
    writer = PodGroupStatusWriter(
        h.cluster,  # type: ignore[arg-type]  # reads objects only (get)
        h.sched,
        reporter="kubesched",
        leading=lambda: True,
    )
    h.cluster.subscribe(writer.on_event)
    if not arrive_while_running:
        h.apply(*objects)
    keys = [f"default/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod"]
    async with running(h):
        if arrive_while_running:
            h.apply(*objects)
        await asyncio.sleep(20)
        h.apply(make_pod("plain").req(cpu="100m").obj())
        await h.wait_for(lambda: h.node_of("default/plain") is not None)

    assert [k for k in keys if h.node_of(k)] == []  # nothing of the gang bound
    for key in keys:
        messages = [e.message for e in h.cluster.events_for(key)]
        if event:
            assert any(m.startswith(event) for m in messages), (key, messages)
        else:
            assert messages == [], messages
        assert attempts(h, key) <= MAX_ATTEMPTS, f"{key}: {attempts(h, key)} attempts in 20 s"
    group = h.cluster.get(STORE_KINDS[GangAPI.UPSTREAM], "default", "g")
    if condition is None:
        assert group is None or writer.desired_foreign(GangAPI.UPSTREAM, group) is None
    else:
        assert group is not None
        status = writer.desired_foreign(GangAPI.UPSTREAM, group)
        assert status is not None
        (cond,) = status["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodGroupInitiallyScheduled",
            "False",
            "Unschedulable",
        )
        assert cond["message"].startswith(condition), cond["message"]


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_gang_input_binds_nothing_says_why_and_the_loop_goes_on(case: str) -> None:
    await check(case, arrive_while_running=False)


@pytest.mark.parametrize(
    "case",
    list(CASES),
)
async def test_the_same_with_members_arriving_while_the_scheduler_runs(case: str) -> None:
    await check(case, arrive_while_running=True)
