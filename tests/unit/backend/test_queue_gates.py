"""The gated pool: pods by uid in arrival order, and by the PreEnqueue plugin holding
each, so an event one plugin registered for looks at that plugin's pods only."""

from __future__ import annotations

import random

from kubesched.backend.queue_gates import GatedPool
from kubesched.framework.nodeinfo import QueuedPodInfo
from tests.builders import make_pod


def _held(name: str, plugin: str) -> QueuedPodInfo:
    qpi = QueuedPodInfo(pod=make_pod(name).uid(name).pod(), timestamp=0.0)
    qpi.gated, qpi.gating_plugin = True, plugin
    return qpi


def test_held_by_gives_a_plugins_pods_in_the_pools_order_through_puts_and_pops() -> None:
    """Against the plain walk it replaces (every gated pod, filtered by its plugin), over
    random puts (re-gating a pod by another plugin among them) and pops."""
    rng = random.Random(7)
    plugins = ["SchedulingGates", "Coscheduling", "DynamicResources"]
    pool = GatedPool()
    reference: dict[str, QueuedPodInfo] = {}
    for step in range(2000):
        name = f"p{rng.randrange(60)}"
        if rng.random() < 0.6:
            qpi = pool.get(name) or _held(name, rng.choice(plugins))
            pool.pop(name)
            reference.pop(name, None)
            qpi.gating_plugin = rng.choice(plugins)  # gated anew, maybe by another plugin
            pool.put(qpi)
            reference[name] = qpi
        else:
            assert pool.pop(name) is reference.pop(name, None)
        asked = set(rng.sample(plugins, rng.randrange(len(plugins) + 1)))
        expected = [q for q in reference.values() if q.gating_plugin in asked]
        assert pool.held_by(asked) == expected, step
        assert list(pool.values()) == list(reference.values())
        assert len(pool) == len(reference)
