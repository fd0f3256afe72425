"""Random upstream gangs against the real kube-scheduler: the gang kind of
:mod:`tests.e2e.random_clusters` (an upstream Workload + PodGroup of two to four alike
members, maybe held to one rack, on nodes running pods of priorities below and above the
gang's; or a gang needing fewer members than it has, among pods it cannot evict)
played to kube-scheduler 1.37 with its own gang scheduling on and to ``kubesched run``.

``kubesched simulate`` predicts each member's outcome; each scheduler waits for it. Both
must then agree on:

* whether the gang is placed, and how many members are bound (never fewer than its
  ``minCount``): the nodes are not compared, ties break differently;
* which running pods pod group preemption evicted;
* the nomination each member left pending has.

A rejected group's members' messages are not compared: kubesched words them its own way
(docs/differences.md, "Gangs"). The control plane is the gang differential's
(``gang_control_plane``): its feature gates (``GenericWorkload``,
``TopologyAwareWorkloadScheduling``, ``DRAWorkloadResourceClaims``) and
``scheduling.k8s.io/v1beta1`` served. ``KUBESCHED_RANDOM_SEEDS=first:count`` tries
other seeds, as in test_random_differential.
"""

from __future__ import annotations

import pathlib
import random
from collections.abc import Iterator

import pytest
import yaml

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.differential_support import KUBE_SCHEDULER, KUBESCHED, PENDING, run_scenario
from tests.e2e.gang_support import (
    gang_control_plane,
    gangs_of,
    minimums_of,
    wipe_upstream,
)
from tests.e2e.random_builders import SEEDS
from tests.e2e.random_workloads import gang
from tests.e2e.scenario_cluster import prepare
from tests.e2e.simulate_support import SEED, expected_outcomes, simulated

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def random_gang_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with gang_control_plane(controlplane_binaries) as cp:
        yield cp


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_gang(
    random_gang_cluster: ControlPlane, tmp_path: pathlib.Path, seed: int
) -> None:
    docs = gang(random.Random(seed))
    path = tmp_path / f"gang-{seed}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    objects = load_scenarios([str(path)])
    created, _ = prepare(objects, KUBESCHED)
    predicted = simulated(created)
    (members,) = gangs_of(objects).values()
    (minimum,) = minimums_of(objects).values()
    node_names = {str(d["metadata"]["name"]) for d in docs if d["kind"] == "Node"}
    expected = {m: expected_outcomes(predicted[m][0], node_names) for m in members}
    runs = []
    for scheduler in (KUBE_SCHEDULER, KUBESCHED):
        wipe_upstream(random_gang_cluster.api)
        runs.append(run_scenario(random_gang_cluster, objects, expected, scheduler, seed=SEED))
    theirs, ours = runs
    report = (
        f"\ngang seed {seed}, predicted "
        + "; ".join(f"{m}={predicted[m][0]}" for m in members)
        + f"\nkube-scheduler: {theirs.summary()}\nkubesched:      {ours.summary()}"
        + f"\n---\n{path.read_text()}"
    )
    bound = []
    for run in runs:
        placed = [m for m in members if run.outcomes[m][0] not in PENDING]
        assert not placed or len(placed) >= minimum, f"{run.scheduler} bound below minCount{report}"
        bound.append(len(placed))
    assert bound[0] == bound[1], (
        f"members bound: kube-scheduler {bound[0]}, kubesched {bound[1]}{report}"
    )
    for m in members:
        if theirs.outcomes[m][0] in PENDING and ours.outcomes[m][0] in PENDING:
            assert ours.nominated[m] == theirs.nominated[m], f"{m}: the nominations differ{report}"
    assert ours.victims == theirs.victims, f"the victims differ{report}"
