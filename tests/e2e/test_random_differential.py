"""Random clusters against the real kube-scheduler: scenarios nobody wrote by hand.

Each case is a small cluster from :mod:`tests.e2e.random_clusters` (its kind and seed
name it) with one pod to schedule. ``kubesched simulate`` predicts whether the pod is
placed or stays unschedulable; the cluster is then played on the real API server to
kube-scheduler 1.37 and to ``kubesched run``, each waiting for that outcome, and the two
must agree:

* both place the pod, or both leave it unschedulable with the same message, byte for
  byte, and the same nomination. The node is compared where one node scores best
  (``kubesched explain`` of the pod against the cluster as created) and no pod was
  evicted: then both must put the pod there; equally scored nodes are broken
  differently (docs/differences.md);
* preemption evicts the same pods.

So a wrong prediction shows as a disagreement too (one scheduler never reaches the
outcome). The seeds are fixed (:data:`SEEDS`); ``KUBESCHED_RANDOM_SEEDS=first:count``
tries others (a failing case's cluster is in the failure message: save it under
``tests/scenarios/`` with its ``# expect:`` line to keep it).
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
from tests.e2e.random_clusters import KINDS, POD
from tests.e2e.scenario_cluster import prepare, scenario_control_plane
from tests.e2e.simulate_support import SEED, best_nodes, expected_outcomes, simulated

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def random_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of this module's own (node counts appear in the messages)."""
    with scenario_control_plane(controlplane_binaries) as cp:
        yield cp


def _fmt(run: Run) -> str:
    where, message = run.outcomes[POD]
    text = f"{where}" + (f" ({message})" if message else "")
    text += f", nominated {run.nominated.get(POD, '')!r}" if where in PENDING else ""
    return text + (f"; victims {sorted(run.victims)}" if run.victims else "")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_random_cluster(
    random_cluster: ControlPlane, tmp_path: pathlib.Path, kind: str, seed: int
) -> None:
    docs = KINDS[kind](random.Random(seed))
    path = tmp_path / f"{kind}-{seed}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    objects = load_scenarios([str(path)])
    created, _ = prepare(objects, KUBESCHED)
    predicted, _ = simulated(created)[POD]
    node_names = {str(d["metadata"]["name"]) for d in docs if d["kind"] == "Node"}
    expected = {POD: expected_outcomes(predicted, node_names)}
    theirs = run_scenario(random_cluster, objects, expected, KUBE_SCHEDULER)
    ours = run_scenario(random_cluster, objects, expected, KUBESCHED, seed=SEED)
    report = (
        f"\n{kind} seed {seed}, predicted {predicted}"
        f"\nkube-scheduler: {_fmt(theirs)}\nkubesched:      {_fmt(ours)}"
        f"\n---\n{path.read_text()}"
    )
    (where, message), (mine, my_message) = theirs.outcomes[POD], ours.outcomes[POD]
    assert (where in PENDING) == (mine in PENDING), f"placed by one only{report}"
    best = best_nodes(created, POD)
    if len(best) == 1 and where not in PENDING and not theirs.victims and not ours.victims:
        # placed on the cluster as it was, and one node scores best: no tie to break
        assert where == mine == best[0], f"not on the best node {best[0]}{report}"
    if where in PENDING:
        assert (mine, my_message) == (where, message), f"the messages differ{report}"
        assert ours.nominated[POD] == theirs.nominated[POD], f"the nominations differ{report}"
    assert ours.victims == theirs.victims, f"the victims differ{report}"
