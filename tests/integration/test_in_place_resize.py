"""An in-place resize seen by the scheduler: a running pod takes from its node the
largest of what its spec asks, what the kubelet allocated and what it uses (as
kube-scheduler 1.37's NodeInfo counts it), and the end of a resize frees the rest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def shrinking(allocated: str) -> dict[str, Any]:
    """Resized down to 1 cpu in its spec; the kubelet reports ``allocated`` cpu."""
    pod = make_pod("shrinking").req(cpu="1").node("n1").obj()
    name = pod["spec"]["containers"][0]["name"]
    pod["status"]["containerStatuses"] = [
        {
            "name": name,
            "allocatedResources": {"cpu": allocated},
            "resources": {"requests": {"cpu": allocated}},
        }
    ]
    return pod


async def test_a_pod_waits_for_a_resize_to_free_the_cpu_it_needs() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="4", memory="32Gi").obj(), shrinking("3"))
    h.apply(make_pod("new").req(cpu="2").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/new"))
        assert h.node_of("default/new") is None
        (event,) = [e for e in h.cluster.events_for("default/new")][:1]
        assert event.message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
        # the kubelet actuates the resize: 1 cpu allocated and in use
        done = shrinking("1")
        stored = h.cluster.pod("default/shrinking")
        assert stored is not None
        current = copy.deepcopy(dict(stored))
        current["status"]["containerStatuses"] = done["status"]["containerStatuses"]
        h.apply(current)
        await h.wait_for(lambda: h.node_of("default/new") == "n1")


async def test_a_resize_down_of_ephemeral_storage_wakes_the_pod_waiting_for_it() -> None:
    """Any resource a resize lowers is a scale-down event (kube-scheduler's
    extractPodScaleDown looks at every resource), not only cpu and memory: the waiting pod
    is requeued at once, not at the five-minute flush."""
    h = Harness()
    running_pod = make_pod("shrinking").req(ephemeral_storage="3Gi").node("n1").obj()
    h.apply(
        make_node("n1").alloc(cpu="4", memory="32Gi", ephemeral_storage="4Gi").obj(),
        running_pod,
    )
    h.apply(make_pod("new").req(ephemeral_storage="2Gi").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/new"))
        assert h.node_of("default/new") is None
        stored = h.cluster.pod("default/shrinking")
        assert stored is not None
        current = copy.deepcopy(dict(stored))
        current["spec"]["containers"][0]["resources"] = {"requests": {"ephemeral-storage": "1Gi"}}
        h.apply(current)
        await h.wait_for(lambda: h.node_of("default/new") == "n1", within=60)
