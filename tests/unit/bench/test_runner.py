"""The pod phases of a benchmark run, with a fake cluster in virtual time: when a run
ends, what it counts, and what the background does to it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.bench.report import RunResult
from kubesched.bench.runner import Limits, RunError, run_pods
from kubesched.bench.tracker import Tracker
from kubesched.simulator.templates import pod
from kubesched.simulator.workloads import BACKGROUND, INIT, MEASURED, Op, Plan

pytestmark = pytest.mark.looptime


class FakeCluster:
    """Binds every pod ``bind_after`` seconds after its creation, unless it is in
    ``never``; every create and delete is a watch event for the tracker."""

    def __init__(self, bind_after: float = 0.5, never: frozenset[str] = frozenset()) -> None:
        self.bind_after = bind_after
        self.never = never
        self.tracker: Tracker | None = None
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.paused = False
        self.held: list[dict[str, Any]] = []

    def _seen(self, event: str, obj: dict[str, Any]) -> None:
        assert self.tracker is not None
        self.tracker.seen(event, obj)

    async def create(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.created.append(name)
        self._seen("ADDED", obj)
        if name not in self.never:
            bound = {**obj, "spec": {**obj["spec"], "nodeName": "n1"}}
            if self.paused:
                self.held.append(bound)
            else:
                asyncio.get_running_loop().call_later(
                    self.bind_after, self._seen, "MODIFIED", bound
                )

    async def pause(self) -> None:
        self.created.append("<pause>")
        self.paused = True

    async def resume(self) -> None:
        await asyncio.sleep(3.0)  # a scheduler process starting
        self.created.append("<resume>")
        self.paused = False
        for bound in self.held:
            asyncio.get_running_loop().call_later(self.bind_after, self._seen, "MODIFIED", bound)
        self.held.clear()

    async def delete(self, obj: dict[str, Any]) -> None:
        self.deleted.append(obj["metadata"]["name"])
        self._seen("DELETED", obj)

    def cpu_seconds(self) -> float | None:
        return None

    def cpu_wait_seconds(self) -> float | None:
        # the scheduler waited half a second for a CPU per pod created
        return 0.5 * len(self.created)

    def other_cpu_seconds(self) -> dict[str, float]:
        # a peer that burns one CPU second per pod created (the API server, say)
        return {"kube-apiserver": float(len(self.created))}

    def check(self) -> None:
        pass


async def run(plan: Plan, cluster: FakeCluster, **limits: float) -> tuple[RunResult, float]:
    loop = asyncio.get_running_loop()
    tracker = Tracker(plan, loop.time)
    cluster.tracker = tracker
    result = RunResult("kubesched", len(plan.measured))
    start = loop.time()
    await run_pods(cluster, plan, tracker, result, Limits(**limits))  # type: ignore[arg-type]
    return result, loop.time() - start


def measured(n: int) -> list[dict[str, Any]]:
    return [pod(f"pod-{i}", MEASURED) for i in range(n)]


async def test_a_run_ends_when_every_measured_pod_is_bound() -> None:
    result, took = await run(Plan("T", [], measured(5)), FakeCluster(bind_after=2.5))
    assert result.scheduled == 5
    assert 2.5 <= took < 4.0
    assert result.latencies == [2.5] * 5
    # whole one-second samples (at 1 s and 2 s), the first dropped; the partial second
    # that ended with the last bind is not a sample (as in scheduler_perf)
    assert result.samples == [0.0]


async def test_init_pods_are_bound_before_the_measured_ones_are_created() -> None:
    plan = Plan("T", [], measured(2), init=[pod("init-0", INIT)])
    cluster = FakeCluster()
    result, _ = await run(plan, cluster)
    assert cluster.created == ["init-0", "pod-0", "pod-1"]
    assert result.phases["init"]["bound"] == 1 and result.scheduled == 2
    # the other processes' CPU covers the measured window only: not the init pod
    assert result.other_cpu_seconds == {"kube-apiserver": 2.0}
    # and so does the scheduler's wait for a CPU
    assert result.cpu_wait_seconds == 1.0
    assert result.to_json()["cpu_wait_seconds"] == 1.0


async def test_a_backlog_is_created_while_the_scheduler_is_paused_and_timed_from_its_start() -> (
    None
):
    plan = Plan("T", [], measured(3), init=[pod("init-0", INIT)])
    cluster = FakeCluster(bind_after=2.0)
    result, took = await run(plan, cluster, arrival="backlog")  # type: ignore[arg-type]
    # init pods with the scheduler running; then every measured pod before it resumes
    assert cluster.created == ["init-0", "<pause>", "pod-0", "pod-1", "pod-2", "<resume>"]
    assert result.scheduled == 3
    # latency from the window's start (the scheduler ready), not from the pods' creation
    # 3 s earlier; the window does not include the scheduler's start-up either
    assert result.latencies == [2.0] * 3
    assert result.seconds == 2.0
    assert took >= 2.0 + 3.0 + 2.0  # init bind + start-up + the backlog's binds
    # the scheduler's start-up: from its process's start (3 s to ready) to its first bind
    assert result.start_to_first_bind == 5.0
    assert result.to_json()["start_to_first_bind_seconds"] == 5.0


async def test_a_streamed_run_has_no_start_to_first_bind() -> None:
    result, _ = await run(Plan("T", [], measured(2)), FakeCluster())
    assert result.start_to_first_bind is None
    assert "start_to_first_bind_seconds" not in result.to_json()


async def test_init_pods_that_are_never_bound_fail_the_run() -> None:
    plan = Plan("T", [], measured(1), init=[pod("init-0", INIT)])
    with pytest.raises(RunError, match="not all 1 init pods were bound within 10 s"):
        await run(plan, FakeCluster(never=frozenset({"init-0"})), timeout=10.0)


async def test_a_run_gives_up_after_the_idle_timeout_when_nothing_happens() -> None:
    cluster = FakeCluster(never=frozenset({"pod-1"}))
    result, took = await run(Plan("T", [], measured(2)), cluster, idle_timeout=5.0)
    assert result.scheduled == 1
    assert 5.0 <= took < 7.0


async def test_background_events_keep_a_slow_run_alive_past_the_idle_timeout() -> None:
    def trickle(tick: int) -> list[Op]:
        return [Op("create", pod(f"bg-{tick}", BACKGROUND))]

    plan = Plan("T", [], measured(2), background=trickle, min_ticks=1)
    cluster = FakeCluster(bind_after=12.0, never=frozenset({f"bg-{i}" for i in range(100)}))
    result, took = await run(plan, cluster, idle_timeout=3.0)
    assert result.scheduled == 2 and took >= 12.0
    bg = result.phases["background"]
    assert bg["ticks"] == bg["created"] == bg["pods"] >= 12 and bg["bound"] == 0


async def test_a_short_run_still_runs_the_background_min_ticks_times_whole() -> None:
    def churn(tick: int) -> list[Op]:
        ops = [Op("create", pod(f"churn-{tick}", BACKGROUND))]
        if tick:
            ops.append(Op("delete", {"kind": "Pod", "metadata": {"name": f"churn-{tick - 1}"}}))
        return ops

    cluster = FakeCluster(bind_after=0.1, never=frozenset({f"churn-{i}" for i in range(10)}))
    result, _ = await run(Plan("T", [], measured(1), background=churn, min_ticks=3), cluster)
    assert cluster.deleted == ["churn-0", "churn-1"]
    bg = result.phases["background"]
    assert (bg["ticks"], bg["created"], bg["deleted"], bg["deleted_by_bench"]) == (3, 3, 2, 2)
    assert bg["deleted_by_scheduler"] == 0


def test_gang_latency_runs_from_the_first_member_created_to_the_last_bound() -> None:
    now = [0.0]
    gang = {"kubesched.dev/pod-group": "g0"}
    other = {"kubesched.dev/pod-group": "g1"}
    pods = [pod(f"g0-{i}", MEASURED, labels=gang) for i in range(3)]
    pods += [pod(f"g1-{i}", MEASURED, labels=other) for i in range(2)]
    tracker = Tracker(Plan("Gang", [], pods, gangs={"g0": 3, "g1": 2}), lambda: now[0])
    for i, p in enumerate(pods):
        now[0] = float(i)
        tracker.created_pod(p)
    for name, at in (("g0-0", 5.0), ("g0-2", 9.0), ("g0-1", 6.0), ("g1-0", 7.0)):
        now[0] = at
        tracker.seen("MODIFIED", {"metadata": {"name": name}, "spec": {"nodeName": "n"}})
    result = RunResult("kubesched", len(pods))
    tracker.fill(result, 0.0)
    assert result.gang_latency == {
        "p50": 9.0, "p90": 9.0, "p99": 9.0, "gangs": 2, "bound": 1, "partial": 1
    }  # fmt: skip
    assert result.scheduled == 4
