"""SchedulingProfiles swapped into a running scheduler (in virtual time): the next pod
is placed by the new chain without a restart, an invalid update keeps the last good
chain, a deleted profile leaves its pods pending and untouched, and swapping under
load loses no pod and binds none twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.profile_status import ProfileBook
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

NAME = "swap"


def fit(strategy: str, weight: int = 1) -> dict[str, Any]:
    return {
        "schedulerName": NAME,
        "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": weight}]}},
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}
        ],
    }


def ready(status: dict[str, Any]) -> tuple[str, str]:
    c = status["conditions"][0]
    return c["status"], c["reason"]


def pod(name: str) -> dict[str, Any]:
    return make_pod(name).req(cpu="1", memory="1Gi").scheduler(NAME).obj()


def cluster(h: Harness) -> None:
    # node-1 carries load; node-2 is empty: LeastAllocated picks node-2, MostAllocated node-1.
    h.apply(
        make_node("node-1").capacity(cpu="8", memory="32Gi", pods="110").obj(),
        make_node("node-2").capacity(cpu="8", memory="32Gi", pods="110").obj(),
        make_pod("load").req(cpu="3", memory="4Gi").node("node-1").obj(),
    )


async def test_changing_the_strategy_changes_the_next_placement() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    cluster(h)
    assert ready(book.apply("p", fit("LeastAllocated"), 1)) == ("True", "Compiled")
    async with running(h):
        h.apply(pod("before"))
        await h.wait_for(lambda: h.node_of("default/before") is not None)
        assert h.node_of("default/before") == "node-2"
        status = book.apply("p", fit("MostAllocated", weight=5), 2)
        assert status["activeGeneration"] == 2
        assert "NodeResourcesFit:5" in status["activePlugins"]["score"]
        h.apply(pod("after"))
        await h.wait_for(lambda: h.node_of("default/after") is not None)
        assert h.node_of("default/after") == "node-1"


async def test_an_invalid_update_keeps_the_last_good_chain_serving() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    cluster(h)
    book.apply("p", fit("MostAllocated"), 1)
    async with running(h):
        bad = fit("MostAllocated")
        bad["pluginConfig"][0]["args"]["scoringStrategy"]["type"] = "Packed"
        status = book.apply("p", bad, 2)
        assert ready(status) == ("False", "InvalidArgs")
        message = status["conditions"][0]["message"]
        assert message.startswith("pluginConfig[0].args.scoringStrategy.type: ")
        assert message.endswith(
            "the last good chain (generation 1) keeps serving schedulerName 'swap'"
        )
        assert (status["observedGeneration"], status["activeGeneration"]) == (2, 1)
        h.apply(pod("still-packed"))
        await h.wait_for(lambda: h.node_of("default/still-packed") is not None)
        assert h.node_of("default/still-packed") == "node-1"


async def test_deleting_a_profile_leaves_its_pods_pending_until_a_new_one_comes() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    cluster(h)
    book.apply("p", fit("LeastAllocated"), 1)
    async with running(h):
        book.delete("p")
        assert NAME not in h.sched.profiles
        h.apply(pod("waits"))
        await asyncio.sleep(30)
        assert h.node_of("default/waits") is None
        assert h.cluster.events_for("default/waits") == []  # untouched: no event, no status
        pod_obj = h.cluster.pod("default/waits")
        assert pod_obj is not None and not (pod_obj.get("status") or {}).get("conditions")
        book.apply("p2", fit("MostAllocated"), 1)
        await h.wait_for(lambda: h.node_of("default/waits") is not None)
        assert h.node_of("default/waits") == "node-1"


async def test_the_builtin_default_comes_back_when_its_override_is_deleted() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    cluster(h)
    book.apply("default", {"percentageOfNodesToScore": 40}, 1)
    assert h.sched.profiles["kubesched"].spec.percentage_of_nodes_to_score == 40
    book.delete("default")
    assert h.sched.profiles["kubesched"].spec.percentage_of_nodes_to_score is None
    async with running(h):
        h.apply(make_pod("default-pod").req(cpu="1").obj())
        await h.wait_for(lambda: h.node_of("default/default-pod") == "node-2")


async def test_ten_swaps_while_2000_pods_are_scheduled_lose_none_and_bind_none_twice() -> None:
    h = Harness()
    book = ProfileBook(h.sched)
    for i in range(50):
        h.apply(make_node(f"n{i:02d}").capacity(cpu="64", memory="256Gi", pods="110").obj())
    book.apply("p", fit("LeastAllocated"), 1)
    pods = 2000
    async with running(h):
        for i in range(pods):
            h.apply(make_pod(f"p{i:04d}").req(cpu="100m", memory="128Mi").scheduler(NAME).obj())
        swaps = 0
        for generation in range(2, 12):
            # Swap after every ~150 binds: between cycles, with binds in flight.
            target = (generation - 1) * 150
            await h.wait_for(lambda: len(h.cluster.bindings) >= target, step=0)  # noqa: B023
            bound = len(h.cluster.bindings)
            q = h.sched.queues.queue(NAME)
            assert q is not None and sum(q.pending_counts().values()) > 0
            strategy = "MostAllocated" if generation % 2 else "LeastAllocated"
            status = book.apply("p", fit(strategy, weight=generation), generation)
            assert status["activeGeneration"] == generation
            swaps += 1
            assert bound < pods, "the swaps must happen while pods are being scheduled"
            assert h.sched._tasks, "binding cycles in flight during the swap"
        await h.wait_for(lambda: len(h.cluster.bindings) >= pods, within=600)
        await asyncio.sleep(5)
    assert swaps == 10
    keys = [key for key, _ in h.cluster.bindings]
    assert len(keys) == pods and len(set(keys)) == pods
    assert all(h.node_of(f"default/p{i:04d}") is not None for i in range(pods))


async def test_a_swap_keeps_a_pending_pods_attempts_and_backoff_counts() -> None:
    """The new chain's queue takes the pod's history: its next backoff is as long as it
    would have been (kube's two counts), and its attempts still count from the first."""
    h = Harness()
    book = ProfileBook(h.sched)
    cluster(h)
    book.apply("p", fit("LeastAllocated"), 1)
    async with running(h):
        h.apply(make_pod("big").req(cpu="64", memory="1Gi").scheduler(NAME).obj())
        raw = h.cluster.pod("default/big")
        assert raw is not None
        uid = raw["metadata"]["uid"]

        def queued() -> Any:
            q = h.sched.queues.queue(NAME)
            return None if q is None else q.get(uid)

        await h.wait_for(lambda: (qpi := queued()) is not None and qpi.unschedulable_count >= 1)
        before = queued()
        history = (before.attempts, before.unschedulable_count, before.consecutive_errors)
        first = before.initial_attempt_timestamp
        book.apply("p", fit("MostAllocated"), 2)
        after = queued()
        assert after is not before
        assert (after.attempts, after.unschedulable_count, after.consecutive_errors) == history
        assert after.initial_attempt_timestamp == first
