"""A pending pod's own update, as kube-scheduler 1.37 treats it: the plugins that
rejected the pod say, through their queueing hints, whether the change may help. A change
none of them cares about leaves the pod parked (no new attempt, no new FailedScheduling
event); one that may help sends it to be tried again."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def updated(h: Harness, key: str, edit: Any) -> dict[str, Any]:
    stored = h.cluster.pod(key)
    assert stored is not None
    raw = copy.deepcopy(dict(stored))
    edit(raw)
    return raw


async def test_a_label_on_a_pod_short_of_cpu_leaves_it_parked() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="1", memory="4Gi").obj(), make_pod("big").req(cpu="2").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big"))
        before = h.reasons("default/big").count("FailedScheduling")
        h.apply(updated(h, "default/big", lambda r: r["metadata"].update(labels={"team": "a"})))
        await asyncio.sleep(30)  # well past any backoff
        assert h.reasons("default/big").count("FailedScheduling") == before
        assert h.node_of("default/big") is None
        # what NodeResourcesFit waits for: room (a node with more cpu)
        h.apply(make_node("n2").alloc(cpu="4", memory="4Gi").obj())
        await h.wait_for(lambda: h.node_of("default/big") == "n2")


async def test_a_toleration_added_to_a_pod_kept_off_a_tainted_node_lets_it_bind() -> None:
    h = Harness()
    h.apply(
        make_node("n1").alloc(cpu="4", memory="4Gi").taint("dedicated", "gpu").obj(),
        make_pod("web").req(cpu="1").obj(),
    )
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/web"))
        toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu"}
        h.apply(updated(h, "default/web", lambda r: r["spec"].update(tolerations=[toleration])))
        await h.wait_for(lambda: h.node_of("default/web") == "n1", within=20)
