"""A PodGroup deleted (``kubectl delete``) while its gang is pending, on the real
kube-apiserver (issue 9, conflicts; the whole-group cycle since issue 14): no member is
ever held at Permit, so nothing waits to be rejected; the members stay pending, nothing
of the gang binds, each member gets a FailedScheduling event saying the group does not
exist, the cache equals the API, and the gang binds whole once the group is created
again. The PodGroup carries kubesched's finalizer, so kubesched sees it terminating
first and then gone.
"""

from __future__ import annotations

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
    read_group,
    scheduled_condition,
)

pytestmark = pytest.mark.timeout(120)

JSON = dict[str, Any]


async def test_a_pending_gang_whose_group_is_deleted_waits_and_binds_when_it_returns(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
) -> None:
    cp, sel = controlplane, pool()
    node = f"gone-{sel[next(iter(sel))]}-"
    await call(cp.create_nodes, 1, labels=sel, cpu="2", prefix=node)
    # three members of 1 CPU on one 2-CPU node: the gang cannot be placed
    await call(apply, cp, namespace, pod_group("gone", 3), *members("gone", 3, sel, cpu="1"))

    def unschedulable() -> JSON | None:
        cond = scheduled_condition(read_group(cp, namespace, "gone"))
        return cond if cond.get("reason") == "Unschedulable" else None

    await eventually(unschedulable, what="the gang reported unschedulable")
    out = await call(cp.kubectl, "delete", "-n", namespace, "podgroup", "gone", "--wait=false")
    assert out.returncode == 0, out.stderr
    # room for the whole gang now: only the missing group holds it back
    await call(cp.create_nodes, 1, labels=sel, cpu="4", prefix=f"{node}big-")
    message = f'pod group "{namespace}/gone" does not exist; waiting for it to be created'
    for name in ("gone-0", "gone-1", "gone-2"):

        def told(n: str = name) -> list[JSON]:
            return [
                e
                for e in events(cp, namespace, "Pod", n)
                if e["reason"] == "FailedScheduling" and e["note"] == message
            ]

        await eventually(told, what=f"FailedScheduling naming the missing group on {name}")
    assert await call(bound, cp, namespace, "gone") == []
    url = f"http://127.0.0.1:{kubesched.port}"
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)
    assert dump["assumed"] == []
    assert {p["pod"] for p in dump["pending"]} == {f"{namespace}/gone-{i}" for i in range(3)}
    assert all(p["reason"] for p in dump["pending"])
    # the group comes back: the gang binds whole
    await call(apply, cp, namespace, pod_group("gone", 3))
    got = await eventually(
        lambda: (b := bound(cp, namespace, "gone")) and len(b) == 3 and b, what="3 members bound"
    )
    assert len(got) == 3
