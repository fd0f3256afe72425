"""A PodGroup deleted (``kubectl delete``) while its gang is pending, on the real
kube-apiserver (issue 9, conflicts; the whole-group cycle since issue 14): no member is
ever held at Permit, so nothing waits to be rejected; the members stay pending, nothing
of the gang binds, each member gets a FailedScheduling event saying the group does not
exist, the cache equals the API, and the gang binds whole once the group is created
again.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ApiError, ControlPlane
from tests.e2e.cachecheck import assert_cache_matches_api
from tests.e2e.support import call, eventually
from tests.e2e.test_gang_e2e import (
    apply,
    apply_group_first,
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


def deleting(kubesched: Runtime, namespace: str, name: str) -> bool:
    """Whether kubesched's cache has the PodGroup terminating, or no longer has it."""
    group = kubesched.cluster.get("PodGroup", namespace, name)
    return group is None or bool(group["metadata"].get("deletionTimestamp"))


def absent(cp: ControlPlane, namespace: str, name: str) -> bool:
    try:
        read_group(cp, namespace, name)
    except ApiError as e:
        if e.status == 404:
            return True
        raise
    return False


async def test_a_pending_gang_whose_group_is_deleted_waits_and_binds_when_it_returns(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
) -> None:
    cp, sel = controlplane, pool()
    node = f"gone-{sel[next(iter(sel))]}-"
    await call(cp.create_nodes, 1, labels=sel, cpu="2", prefix=node)
    # three members of 1 CPU on one 2-CPU node: the gang cannot be placed
    gang = members("gone", 3, sel, cpu="1")
    await apply_group_first(cp, kubesched, namespace, pod_group("gone", 3), *gang)

    def unschedulable() -> JSON | None:
        cond = scheduled_condition(read_group(cp, namespace, "gone"))
        return cond if cond.get("reason") == "Unschedulable" else None

    await eventually(unschedulable, what="the gang reported unschedulable")
    out = await call(cp.kubectl, "delete", "-n", namespace, "podgroup", "gone", "--wait=false")
    assert out.returncode == 0, out.stderr
    # The deletion comes by the PodGroups' watch, the node below by the nodes', with no
    # order between them: a node seen first would have the gang bound, its group still
    # there.
    await eventually(
        lambda: deleting(kubesched, namespace, "gone"),
        what="kubesched seeing the PodGroup deleted",
        in_thread=False,
    )
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
    # the group comes back: the gang binds whole. Not before the old one is gone: applied
    # to it while it terminated, it would be gone with it.
    await eventually(lambda: absent(cp, namespace, "gone"), what="the old PodGroup gone")
    await call(apply, cp, namespace, pod_group("gone", 3))
    got = await eventually(
        lambda: (b := bound(cp, namespace, "gone")) and len(b) == 3 and b, what="3 members bound"
    )
    assert len(got) == 3
