"""Gang-aware preemption on the real kube-apiserver: a high-priority gang evicts two
low-priority gangs whole and binds (issue 14, item 4).

Two nodes of 4 cpu are filled by two low-priority gangs (kubesched.dev PodGroups, which
preemption evicts whole) of two 2-cpu members each, scheduled by kubesched. A gang of
four 2-cpu members of a higher PriorityClass arrives: every low pod gets the
``DisruptionTarget`` condition (``PreemptionByScheduler``), a ``Preempted`` event naming
the PodGroup's uid, and is deleted; the members fail once with kube's
``pod group preemption: found a placement for podgroup, preempting 4 victims`` and bind
once the victims are gone. No kubelet runs here, so the test finishes each victim's
graceful deletion as a kubelet would (grace 0). The run ends with kubesched's cache
equal to the API.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.e2e.cachecheck import assert_cache_matches_api
from tests.e2e.support import call, eventually
from tests.e2e.test_gang_e2e import (
    apply,
    bound,
    events,
    members,
    pod_group,
    pool,
)

pytestmark = pytest.mark.timeout(150)

JSON = dict[str, Any]


def priority_class(name: str, value: int) -> JSON:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def with_priority(pods: list[JSON], class_name: str) -> list[JSON]:
    for p in pods:
        p["spec"]["priorityClassName"] = class_name
    return pods


def disruption_target(pod: JSON) -> JSON:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget":
            return dict(c)
    return {}


async def test_high_priority_gang_evicts_two_low_priority_gangs_whole_and_binds(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
) -> None:
    cp, sel = controlplane, pool()
    suffix = uuid.uuid4().hex[:8]
    low, high = f"gang-low-{suffix}", f"gang-high-{suffix}"
    out = await call(
        cp.kubectl,
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [priority_class(low, 10), priority_class(high, 1000)],
            }
        ),
    )
    assert out.returncode == 0, out.stderr
    nodes = await call(cp.create_nodes, 2, labels=sel, prefix=f"gp-{suffix}-", cpu="4")

    await call(
        apply,
        cp,
        namespace,
        pod_group("a", 2),
        pod_group("b", 2),
        *with_priority(members("a", 2, sel, cpu="2"), low),
        *with_priority(members("b", 2, sel, cpu="2"), low),
    )
    await eventually(
        lambda: len(bound(cp, namespace, "a")) + len(bound(cp, namespace, "b")) == 4,
        what="the two low-priority gangs bound",
    )
    victims = ["a-0", "a-1", "b-0", "b-1"]

    gang = with_priority(members("high", 4, sel, cpu="2"), high)
    await call(apply, cp, namespace, pod_group("high", 4), *gang)
    seen_conditions: dict[str, JSON] = {}

    def act_as_kubelet() -> bool:
        """Finish the graceful deletion of each victim marked terminating."""
        pods = {p["metadata"]["name"]: p for p in cp.api.list("v1", "Pod", namespace)}
        left = 0
        for name in victims:
            pod = pods.get(name)
            if pod is None:
                continue
            left += 1
            if pod["metadata"].get("deletionTimestamp"):
                seen_conditions[name] = disruption_target(pod)
                cp.api.remove("v1", "Pod", name, namespace, grace_period_seconds=0)
        return left == 0

    await eventually(act_as_kubelet, within=60, what="every victim evicted")
    await eventually(
        lambda: len(bound(cp, namespace, "high")) == 4, within=60, what="the high gang bound"
    )
    assert set(await call(bound, cp, namespace, "high")) <= set(nodes)

    group = await call(cp.api.read, "kubesched.dev/v1alpha1", "PodGroup", "high", namespace)
    uid = group["metadata"]["uid"]
    for name in victims:
        cond = seen_conditions.get(name, {})
        assert cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler", (
            name,
            cond,
        )
        assert cond.get("message") == (
            "kubesched: preempting to accommodate a higher priority podgroup"
        )
        preempted = [
            e for e in await call(events, cp, namespace, "Pod", name) if e["reason"] == "Preempted"
        ]
        assert [e["note"] for e in preempted] == [f"Preempted by podgroup {uid} on node cluster"]
    failed = [
        e["note"]
        for e in await call(events, cp, namespace, "Pod", "high-0")
        if e["reason"] == "FailedScheduling"
    ]
    assert any(
        n.endswith("pod group preemption: found a placement for podgroup, preempting 4 victims")
        for n in failed
    ), failed

    url = f"http://127.0.0.1:{kubesched.port}"
    await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)
