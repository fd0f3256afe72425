"""Random bursts against the real kube-scheduler: several pending pods at once on a few
nodes (:func:`tests.e2e.random_bursts.burst`), played to kube-scheduler 1.37 and to
``kubesched run``, where what one pod is given decides what the next can have. The queue
takes them by priority (distinct, so both take one order); a preemptor's nomination
holds room for it while its victims go, against the fillers below it; the fillers that
found no room are tried again once the victims are gone.

``kubesched simulate`` predicts each pod's outcome; each scheduler waits for it. Both
must then agree on which pods are bound (the nodes are not compared: a tie between
nodes cascades into the next pods' choices), which running pods were evicted, and, for
each pod left pending, its message and its nomination. ``KUBESCHED_RANDOM_SEEDS=
first:count`` tries other seeds, as in test_random_differential.
"""

from __future__ import annotations

import pathlib
import random
from collections.abc import Iterator

import pytest
import yaml

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.differential_support import KUBE_SCHEDULER, KUBESCHED, PENDING, Run, run_scenario
from tests.e2e.random_builders import SEEDS
from tests.e2e.random_bursts import burst
from tests.e2e.scenario_cluster import prepare, scenario_control_plane
from tests.e2e.simulate_support import SEED, expected_outcomes, simulated

pytestmark = pytest.mark.timeout(150)


@pytest.fixture(scope="module")
def burst_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of this module's own (node counts appear in the messages)."""
    with scenario_control_plane(controlplane_binaries) as cp:
        yield cp


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_burst(burst_cluster: ControlPlane, tmp_path: pathlib.Path, seed: int) -> None:
    docs = burst(random.Random(seed))
    path = tmp_path / f"burst-{seed}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    objects = load_scenarios([str(path)])
    created, pending = prepare(objects, KUBESCHED)
    predicted = simulated(created)
    node_names = {str(d["metadata"]["name"]) for d in docs if d["kind"] == "Node"}
    expected = {k: expected_outcomes(predicted[k][0], node_names) for k in pending}
    theirs = run_scenario(burst_cluster, objects, expected, KUBE_SCHEDULER)
    ours = run_scenario(burst_cluster, objects, expected, KUBESCHED, seed=SEED)
    report = (
        f"\nburst seed {seed}, predicted "
        + "; ".join(f"{k.partition('/')[2]}={predicted[k][0]}" for k in sorted(pending))
        + f"\nkube-scheduler: {theirs.summary()}\nkubesched:      {ours.summary()}"
        + f"\n---\n{path.read_text()}"
    )

    def bound(run: Run) -> set[str]:
        return {k for k, (where, _) in run.outcomes.items() if where not in PENDING}

    assert bound(ours) == bound(theirs), f"different pods bound{report}"
    assert ours.victims == theirs.victims, f"the victims differ{report}"
    for k in sorted(set(pending) - bound(theirs)):
        assert ours.outcomes[k] == theirs.outcomes[k], f"{k}: the outcomes differ{report}"
        assert ours.nominated[k] == theirs.nominated[k], f"{k}: the nominations differ{report}"
