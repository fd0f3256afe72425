"""The phases of one benchmark run, the same for both targets.

A target supplies a :class:`Driver` (create and delete objects, the scheduler's CPU and
memory) and reports the pods it sees change to the :class:`Tracker`; :func:`run_pods`
does the rest, after the target created the setup objects and the nodes:

1. create the init pods and, when the plan says so, wait until all are bound;
2. create the gated pods;
3. the measured window: create the measured pods (``creators`` in flight), run the
   plan's background operations every ``interval`` (tick 0 at once), and sample the
   measured binds once a second, until every measured pod is bound and the background
   ran ``min_ticks`` ticks.

With ``arrival="backlog"`` the scheduler is paused after the init pods (a cluster
target stops the scheduler's process), the gated and measured pods are all created,
and the window opens when the scheduler is back and ready: the scheduler then works
through a queue of every measured pod, so its throughput is its own and not the pace
of the pod creators (which, on a small machine, both schedulers keep up with in the
default ``stream`` arrival). Latency then runs from the window's start. A cluster
target's scheduler is a new process then: the time from its start to its first bind
is its start-up (``start_to_first_bind_seconds``).

The run gives up when nothing happened to any pod of the run for ``idle_timeout``
seconds (the background's pods and the scheduler's status writes count as something,
so churn keeps a run alive), or after ``timeout`` seconds in all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.bench.report import RunResult
from kubesched.bench.tracker import Tracker
from kubesched.operator.stopping import until_set
from kubesched.simulator.workloads import INIT, MEASURED, Plan

__all__ = ["Driver", "Limits", "RunError", "bounded", "run_pods"]


class RunError(RuntimeError):
    """A phase did not complete (e.g. the init pods were never all bound)."""


@dataclass(frozen=True)
class Limits:
    creators: int = 32
    """Create requests in flight at once."""
    idle_timeout: float = 30.0
    """Give up when no pod of the run changed for this long."""
    timeout: float = 600.0
    """Give up on a phase (init, measured) after this long."""
    arrival: str = "stream"
    """``stream``: measured pods are created while the scheduler runs (scheduler_perf's
    way); ``backlog``: all are created while it is paused, then it starts."""


class Driver(Protocol):
    async def create(self, obj: dict[str, Any]) -> None: ...
    async def delete(self, obj: dict[str, Any]) -> None:
        """Delete the object ``obj`` names (kind, metadata.name); gone already is fine."""

    def cpu_seconds(self) -> float | None: ...
    def cpu_wait_seconds(self) -> float | None:
        """Seconds the scheduler's threads were runnable but waiting for a CPU, so far
        (None: not known)."""

    def other_cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far of the other processes on the path (API server, etcd, the
        bench itself), by name: where the machine's time went besides the scheduler."""

    def check(self) -> None:
        """Raise when the scheduler or the watch died."""

    async def pause(self) -> None:
        """Stop scheduling until :meth:`resume` (pods created meanwhile wait)."""

    async def resume(self) -> None:
        """Schedule again; return once the scheduler is ready."""


async def bounded(limit: int, fn: Callable[[Any], Awaitable[None]], items: Iterable[Any]) -> None:
    """``fn(item)`` for each item, at most ``limit`` in flight; the first failure is raised."""
    queue = list(items)
    queue.reverse()

    async def worker() -> None:
        while queue:
            await fn(queue.pop())

    await asyncio.gather(*(worker() for _ in range(max(1, limit))))


async def _create_pods(
    driver: Driver, tracker: Tracker, pods: Sequence[dict[str, Any]], creators: int
) -> None:
    async def one(obj: dict[str, Any]) -> None:
        await driver.create(obj)
        tracker.created_pod(obj)

    await bounded(creators, one, pods)


async def _until(driver: Driver, check: Callable[[], bool], within: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        driver.check()
        if loop.time() > deadline:
            raise RunError(f"{what} within {within:.0f} s")
        await asyncio.sleep(0.05)


async def _background(driver: Driver, plan: Plan, tracker: Tracker, stop: asyncio.Event) -> None:
    """Tick after tick until ``stop`` is set; a tick is never cut short."""
    tick = 0
    while not stop.is_set():
        for op in plan.background(tick):
            if op.action == "create":
                await driver.create(op.obj)
                if op.obj.get("kind") == "Pod":
                    tracker.created_pod(op.obj)
            else:
                if op.obj.get("kind") == "Pod":
                    tracker.deleting(str(op.obj["metadata"]["name"]))
                await driver.delete(op.obj)
            tracker.background_ops[op.action] += 1
        tick += 1
        tracker.ticks = tick
        await until_set(stop, plan.interval)


@dataclass
class _Window:
    """Where the measured window opened: its time and the CPU counters then."""

    start: float
    cpu_start: float | None
    others_start: dict[str, float]
    wait_start: float | None = None
    resumed_at: float | None = None
    """Set when the resume started a new scheduler process (its start-up is measured)."""


async def run_pods(
    driver: Driver, plan: Plan, tracker: Tracker, result: RunResult, limits: Limits
) -> None:
    """Run the pod phases; ``result`` gets the figures (CPU of the measured window too)."""
    await _create_pods(driver, tracker, plan.init, limits.creators)
    if plan.init and plan.wait_init:
        await _until(
            driver,
            lambda: tracker.bound_in(INIT) >= len(plan.init),
            limits.timeout,
            f"not all {len(plan.init)} init pods were bound",
        )
    backlog = limits.arrival == "backlog"
    if backlog:
        await driver.pause()
    await _create_pods(driver, tracker, plan.gated, limits.creators)
    if backlog:
        window = await _open_after_backlog(driver, plan, tracker, limits)
    else:
        cpu_start, others_start = driver.cpu_seconds(), driver.other_cpu_seconds()
        window = _Window(asyncio.get_running_loop().time(), cpu_start, others_start)
        window.wait_start = driver.cpu_wait_seconds()
        tracker.counts = [(window.start, tracker.measured_bound)]
    await _measure(driver, plan, tracker, result, limits, window.start, backlog)
    _close_window(driver, tracker, result, window)


async def _open_after_backlog(
    driver: Driver, plan: Plan, tracker: Tracker, limits: Limits
) -> _Window:
    """Create the measured pods while the scheduler is paused, resume it, and open the
    window when it is ready."""
    loop = asyncio.get_running_loop()
    await _create_pods(driver, tracker, plan.measured, limits.creators)
    # The scheduler's CPU from before it resumes: a cluster target's new process
    # (None until it exists: from zero, its start-up and first LIST included).
    cpu_start = driver.cpu_seconds()
    others_start = driver.other_cpu_seconds()
    wait_start = driver.cpu_wait_seconds()
    resuming = loop.time()
    await driver.resume()
    # The window opens when the scheduler is ready, or at its first measured bind
    # if that came first (kube-scheduler may bind a small backlog before its
    # /readyz is polled).
    start = loop.time()
    first = min(
        (t for n, t in tracker.bound.items() if tracker.role.get(n) == MEASURED),
        default=start,
    )
    start = max(resuming, min(start, first))
    tracker.counts = [(start, 0)]
    tracker.restart_clocks(MEASURED, start)
    return _Window(
        start=start,
        cpu_start=cpu_start if cpu_start is not None else 0.0,
        others_start=others_start,
        wait_start=wait_start if wait_start is not None else 0.0,
        # No process before the resume: it started one (a cluster target), and the time
        # from its start to its first bind is the scheduler's start-up.
        resumed_at=resuming if cpu_start is None else None,
    )


async def _measure(
    driver: Driver,
    plan: Plan,
    tracker: Tracker,
    result: RunResult,
    limits: Limits,
    start: float,
    backlog: bool,
) -> None:
    """The measured window: create the measured pods (unless already there), run the
    background, sample binds once a second, until done, idle or out of time."""
    loop = asyncio.get_running_loop()
    progress = asyncio.Event()
    tracker.on_progress = progress.set
    tracker.last_activity = loop.time()

    async def creating() -> None:
        if not backlog:
            await _create_pods(driver, tracker, plan.measured, limits.creators)
        result.creation_seconds = loop.time() - start

    creator = asyncio.create_task(creating())
    stop = asyncio.Event()
    background = None
    if plan.min_ticks:
        background = asyncio.create_task(_background(driver, plan, tracker, stop))
    tasks = [t for t in (creator, background) if t is not None]
    try:
        next_sample = start + 1.0
        while True:
            progress.clear()
            # a Ctrl-C as progress is set must not be lost (see until_set)
            await until_set(progress, max(0.0, next_sample - loop.time()))
            now = loop.time()
            if now >= next_sample:
                tracker.sample()
                next_sample += 1.0
            for t in tasks:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    raise t.exception()  # type: ignore[misc]
            driver.check()
            if tracker.done and tracker.ticks >= plan.min_ticks:
                break
            if creator.done() and now - tracker.last_activity > limits.idle_timeout:
                break
            if now - start > limits.timeout:
                break
        await creator
        stop.set()
        if background is not None:
            await background
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _close_window(driver: Driver, tracker: Tracker, result: RunResult, window: _Window) -> None:
    """The figures of the window: start-up, the CPU it took, the tracker's."""
    if window.resumed_at is not None:
        firsts = [t for n, t in tracker.bound.items() if tracker.role.get(n) == MEASURED]
        if firsts:
            result.start_to_first_bind = round(min(firsts) - window.resumed_at, 3)
    cpu_end = driver.cpu_seconds()
    if window.cpu_start is not None and cpu_end is not None:
        result.cpu_seconds = round(cpu_end - window.cpu_start, 3)
    wait_end = driver.cpu_wait_seconds()
    if window.wait_start is not None and wait_end is not None:
        result.cpu_wait_seconds = round(wait_end - window.wait_start, 3)
    others_end = driver.other_cpu_seconds()
    result.other_cpu_seconds = {
        name: round(others_end[name] - before, 3)
        for name, before in window.others_start.items()
        if name in others_end
    }
    tracker.fill(result, window.start)
