"""Opportunistic batching in the running scheduler: identical pods reuse the first one's
work (kube-scheduler's batch metrics say so), and turning it off changes no placement."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def value(h: Harness, name: str, **labels: str) -> float:
    v = h.sched.metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


async def place(batching: bool) -> tuple[Harness, dict[str, str]]:
    h = Harness(seed=0)
    h.sched.opportunistic_batching = batching
    h.apply(*(make_node(f"n{i}").alloc(cpu=str(i + 1), memory="8Gi").obj() for i in range(5)))
    h.apply(*(make_pod(f"web-{j}").req(cpu="250m", memory="256Mi").obj() for j in range(12)))
    keys = [f"default/web-{j}" for j in range(12)]
    async with running(h):
        await h.wait_for(lambda: all(h.node_of(k) is not None for k in keys))
    return h, {k: str(h.node_of(k)) for k in keys}


async def test_identical_pods_are_placed_from_the_batch() -> None:
    on, placed_on = await place(batching=True)
    off, placed_off = await place(batching=False)
    p = "kubesched"
    # Full cycles for the first pod and the 7th: a batch gives as many hints as it had
    # candidates (5 nodes), then expires.
    assert value(on, "scheduler_batch_attempts_total", profile=p, result="hint_used") == 10
    assert value(on, "scheduler_batch_cache_flushed_total", profile=p, reason="expired") == 1
    assert value(off, "scheduler_batch_attempts_total", profile=p, result="hint_used") == 0
    # Least-allocated scoring fills the bigger nodes first, the same way either way.
    assert Counter(placed_on.values()) == Counter(placed_off.values())
