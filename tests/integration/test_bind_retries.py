"""Transient Bind failures on the in-memory cluster, in virtual time: 500s and 429s are
retried in place with backoff (Retry-After honoured) and counted; when the retries run
out the pod is forgotten and requeued with kube-scheduler's ``running Bind plugin
"DefaultBinder": <the API server's message>``; a bind that landed but
failed on our side is recognised by the retry's 409; a pod is never both assumed and
queued."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.types import Pod
from kubesched.scheduler.cachedump import cache_dump
from tests.builders import make_node, make_pod
from tests.e2e.cachecheck import cache_mismatches
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


MESSAGE = "Internal error occurred: etcdserver: request timed out"
"""What the API server says in the Status of a failed call."""


def api_error(code: str, retry_after: float | None = None) -> ClusterError:
    err = ClusterError(f"POST /api/v1/namespaces/default/pods/p/binding: {code} {MESSAGE}")
    err.server_message = MESSAGE
    err.code = code
    err.retry_after = retry_after
    return err


def counter(h: Harness, name: str, code: str) -> float:
    value = h.sched.metrics.registry.get_sample_value(f"{name}_total", {"code": code})
    return value or 0.0


def harness() -> Harness:
    h = Harness()
    h.apply(
        make_node("n1").alloc(cpu="4", memory="8Gi").obj(),
        make_pod("p").uid("uid-p").req(cpu="1").obj(),
    )
    return h


class Watcher:
    """Samples the scheduler's dump every 50 ms: no pod may be both assumed and queued."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.seen_assumed = 0
        self.both: list[str] = []

    async def run(self) -> None:
        while True:
            dump = cache_dump(self.h.sched)
            assumed = {a["pod"] for a in dump["assumed"]}
            self.seen_assumed += bool(assumed)
            self.both += sorted(assumed & {p["pod"] for p in dump["pending"]})
            await asyncio.sleep(0.05)


async def settle(h: Harness) -> None:
    await h.wait_for(lambda: h.node_of("default/p") is not None and not h.sched._tasks)
    await h.wait_for(lambda: not h.sched.cache.assumed_pods())


def consistent(h: Harness) -> list[str]:
    return cache_mismatches(
        cache_dump(h.sched), h.cluster.list("Pod"), h.cluster.list("Node"), "kubesched"
    )


@pytest.mark.parametrize(
    ("code", "retry_after", "min_wait"),
    [("500", None, 0.5 + 1.0), ("503", None, 1.5), ("429", 3.0, 6.0), ("timeout", None, 1.5)],
    ids=["500", "503", "429-retry-after", "timeout"],
)
async def test_transient_errors_are_retried_in_place_and_counted(
    code: str, retry_after: float | None, min_wait: float
) -> None:
    h = harness()
    h.cluster.fail_next("bind", api_error(code, retry_after), times=2)
    watcher = Watcher(h)
    async with running(h):
        w = asyncio.create_task(watcher.run())
        start = asyncio.get_running_loop().time()
        landed = await h.wait_for(lambda: h.node_of("default/p") is not None)
        await settle(h)
        w.cancel()
    assert h.cluster.bindings == [("default/p", "n1")]
    assert "FailedScheduling" not in h.reasons("default/p")
    assert h.reasons("default/p").count("Scheduled") == 1
    assert counter(h, "kubesched_bind_retries", code) == 2
    assert counter(h, "kubesched_bind_request_errors", code) == 2
    # two waits: 0.5 s then 1 s, or the server's Retry-After twice
    assert landed - start >= min_wait
    assert watcher.seen_assumed and watcher.both == []
    assert consistent(h) == []


async def test_retries_run_out_then_forget_requeue_and_report() -> None:
    h = harness()
    h.cluster.fail_next("bind", api_error("500"), times=4)
    watcher = Watcher(h)
    async with running(h):
        w = asyncio.create_task(watcher.run())
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/p"))
        # forgotten and requeued, not assumed
        dump = cache_dump(h.sched)
        assert dump["assumed"] == []
        (pending,) = dump["pending"]
        assert pending["pod"] == "default/p"
        assert pending["reason"] == f'running Bind plugin "DefaultBinder": {MESSAGE}'
        await settle(h)  # the queue's backoff, then a fifth call that succeeds
        w.cancel()
    assert h.cluster.bindings == [("default/p", "n1")]
    assert counter(h, "kubesched_bind_retries", "500") == 3
    assert counter(h, "kubesched_bind_request_errors", "500") == 4
    (event,) = [e for e in h.cluster.events_for("default/p") if e.reason == "FailedScheduling"]
    assert event.message == f'running Bind plugin "DefaultBinder": {MESSAGE}'
    assert watcher.both == []
    assert consistent(h) == []


async def test_not_retried_when_the_error_is_not_transient() -> None:
    h = harness()
    err = api_error("403")
    err.retryable = False
    h.cluster.fail_next("bind", err, times=1)
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/p"))
        await settle(h)
    assert counter(h, "kubesched_bind_retries", "403") == 0
    assert counter(h, "kubesched_bind_request_errors", "403") == 1
    assert h.cluster.bindings == [("default/p", "n1")]


async def test_a_bind_that_landed_but_timed_out_here_is_not_bound_twice() -> None:
    h = harness()
    original = h.cluster.bind
    calls: list[str] = []

    async def lands_then_times_out(pod: Pod, node: str) -> None:
        calls.append(node)
        await original(pod, node)
        if len(calls) == 1:
            raise api_error("timeout")

    h.cluster.bind = lands_then_times_out  # type: ignore[method-assign,assignment]
    async with running(h):
        await settle(h)
        await asyncio.sleep(30)  # longer than any backoff: a requeued pod would be retried
    assert calls == ["n1", "n1"]  # the retry got 409 "already assigned to node n1"
    assert h.cluster.bindings == [("default/p", "n1")]
    assert "FailedScheduling" not in h.reasons("default/p")
    assert h.reasons("default/p").count("Scheduled") == 1
    assert counter(h, "kubesched_bind_request_errors", "timeout") == 1
    assert h.sched.stats.scheduled == 1
    assert consistent(h) == []


async def test_an_update_of_a_pod_in_its_binding_cycle_does_not_queue_it() -> None:
    h = harness()
    h.cluster.fail_next("bind", api_error("500"), times=2)
    watcher = Watcher(h)
    async with running(h):
        w = asyncio.create_task(watcher.run())
        await h.wait_for(lambda: bool(h.sched.cache.assumed_pods()))
        h.apply(
            make_pod("p").uid("uid-p").req(cpu="1").label("touched", "yes").obj()
        )  # during the retries
        dump = cache_dump(h.sched)  # the watch event was handled; nothing ran since
        await settle(h)
        w.cancel()
    assert [a["pod"] for a in dump["assumed"]] == ["default/p"]
    assert dump["pending"] == []
    assert watcher.both == []
    assert h.cluster.bindings == [("default/p", "n1")]
    assert consistent(h) == []
