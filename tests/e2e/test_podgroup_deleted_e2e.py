"""A PodGroup deleted (``kubectl delete``) while members of its gang wait at Permit, on
the real kube-apiserver (issue 9, conflicts): the waiting members are rejected and
unreserved at once (not at the group's timeout), nothing of the gang binds, each member
gets a FailedScheduling event naming the group as deleted, and the cache equals the
API. The PodGroup carries kubesched's finalizer, so kubesched sees it terminating
first and then gone; either ends the wait.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.operator.run import Runtime
from kubesched.plugins import in_tree_registry
from kubesched.profiles import compile_profile
from tests.controlplane import ControlPlane
from tests.e2e.cachecheck import assert_cache_matches_api
from tests.e2e.test_gang_e2e import (
    FailInRealCycles,
    apply,
    bound,
    call,
    crds,  # noqa: F401 (a fixture this module's tests use through kubesched)
    events,
    eventually,
    kubesched,  # noqa: F401 (the fixture)
    members,
    pod_group,
    pool,
)

pytestmark = pytest.mark.timeout(120)

JSON = dict[str, Any]


async def test_members_waiting_at_permit_are_rejected_when_the_group_is_deleted(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,  # noqa: F811
) -> None:
    cp, sel = controlplane, pool()
    registry = in_tree_registry()
    registry.register("FailInRealCycles", lambda args, handle: FailInRealCycles())
    spec = ProfileSpec(
        plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name="FailInRealCycles")]))
    )
    sched = kubesched.scheduler
    sched.set_profile(compile_profile(spec, sched.services(), registry))
    fwk = sched.profiles["kubesched"].framework
    await call(cp.create_nodes, 1, labels=sel, prefix=f"gone-{sel[next(iter(sel))]}-")
    pods = members("gone", 3, sel, cpu="100m")
    pods[2]["metadata"]["labels"]["slow"] = "yes"
    await call(apply, cp, namespace, pod_group("gone", 3, scheduleTimeoutSeconds=600), *pods)
    await eventually(lambda: len(fwk.waiting_pods) == 2, what="2 members waiting at Permit")

    out = await call(cp.kubectl, "delete", "-n", namespace, "podgroup", "gone", "--wait=false")
    assert out.returncode == 0, out.stderr
    await eventually(lambda: not fwk.waiting_pods, within=20, what="the waiting members rejected")
    message = f'pod group "{namespace}/gone" was deleted'
    for name in ("gone-0", "gone-1"):

        def rejected(n: str = name) -> list[JSON]:
            return [
                e
                for e in events(cp, namespace, "Pod", n)
                if e["reason"] == "FailedScheduling" and message in e["note"]
            ]

        await eventually(rejected, what=f"FailedScheduling on {name}")
    assert await call(bound, cp, namespace, "gone") == []
    url = f"http://127.0.0.1:{kubesched.port}"
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)
    assert dump["assumed"] == []
    assert {p["pod"] for p in dump["pending"]} == {f"{namespace}/gone-{i}" for i in range(3)}
    assert all(p["reason"] for p in dump["pending"])
