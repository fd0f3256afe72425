"""Differential test: the scenario corpus on the real kube-apiserver, scheduled once by the
real kube-scheduler and once by ``kubesched run``.

Each file under tests/scenarios/ starts with ``# expect: ns/name=NODE|NODE2 ...`` saying
what kube-scheduler does with it. For every scenario, on one control plane of this
module's own (so no other test's nodes count):

1. wipe nodes, pods and the other scenario objects;
2. apply the scenario (``load_scenarios`` defaults it; pods get the scheduler's name);
3. start the scheduler only then, so every pod is queued before the first cycle, as in
   the simulator; wait until each pod reached its expected outcome (or a timeout);
4. read the outcome: the node, ``Unschedulable`` (``PodScheduled=False``, reason
   Unschedulable) or ``Waiting`` (pending without that condition, e.g. gated).

kube-scheduler's outcome must satisfy the ``# expect:`` line (this validates the corpus);
kubesched's too; where the expectation names one node both put the pod there, and the
same pods stay unscheduled in both, with the same message.

Of the controllers only kube-controller-manager's resourceclaim controller runs (it makes
the claims of pods using ResourceClaimTemplates, as in a real cluster; the DRA scenarios
publish their ResourceSlices as a driver would); this module plays the other controllers'
part (:class:`Controllers`): pods being
deleted (preemption victims; no kubelet finishes them) are force-deleted, a PV's
``claimRef`` written by VolumeBinding is completed into a bound claim (the PV
controller's ``pv.kubernetes.io/bind-completed``, volumeName and phases), and statuses a
scenario states (PDB ``disruptionsAllowed``, PV/PVC phases, node images, a pod's
``startTime``, a finished pod's phase, a nominated node) are written through the status
subresource. A pod the scenario states as terminating (``metadata.deletionTimestamp``,
which the API server drops on create) is created with a finalizer of this module's and
deleted. The API server's Priority admission refuses a ``spec.priority`` without a
class, so such pods get a PriorityClass of that value.

Gang scenarios (PodGroup) run with kubesched only (kube-scheduler has no Coscheduling):
its outcome must satisfy the expectations. kubesched's CRDs are installed.

The simulator predicts the cluster (:func:`test_simulate_predicts_kubesched_run`): every
scenario, gangs included, also goes through ``kubesched simulate`` in-process, fed the
objects exactly as they were created on the cluster; each pod's outcome (node,
Unschedulable or Waiting) and message must equal ``kubesched run``'s on the real API
server. Both draw their tie-breaks from the same seed (:data:`SEED`), so even a choice
among equal scores must agree.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.differential_support import (
    CORPUS,
    FILES,
    KUBE_SCHEDULER,
    KUBESCHED,
    KUBESCHED_ONLY,
    PENDING,
    Run,
    expectations,
    expected_victims,
    run_scenario,
    uses_upstream_gangs,
)
from tests.e2e.scenario_cluster import prepare, scenario_control_plane
from tests.e2e.simulate_support import SEED, simulated

pytestmark = pytest.mark.timeout(120)

# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diff_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of this module's own: node counts appear in failure messages. The
    real resourceclaim controller makes the claims of pods using ResourceClaimTemplates."""
    with scenario_control_plane(
        controlplane_binaries, controllers=["resourceclaim-controller"]
    ) as cp:
        yield cp


def _ids() -> list[Any]:
    params = []
    for path in FILES:
        if uses_upstream_gangs(path):
            continue
        params.append(pytest.param(path, id=str(path.relative_to(CORPUS))))
    return params


def _fmt(run: Run) -> str:
    text = "; ".join(
        f"{k}={v[0]}" + (f" ({v[1]})" if v[1] else "") for k, v in run.outcomes.items()
    )
    return text + (f"; victims {sorted(run.victims)}" if run.victims else "")


@pytest.mark.parametrize("path", _ids())
def test_kube_scheduler_and_kubesched_agree(diff_cluster: ControlPlane, path: pathlib.Path) -> None:
    expected = expectations(path)
    objects = load_scenarios([str(path)])
    if path.parent.name in KUBESCHED_ONLY:
        ours = run_scenario(diff_cluster, objects, expected, KUBESCHED)
        for key, allowed in expected.items():
            where = ours.outcomes[key][0]
            assert where in allowed, (
                f"kubesched put {key} on {where}, expected {sorted(allowed)}: {_fmt(ours)}"
            )
        return
    theirs = run_scenario(diff_cluster, objects, expected, KUBE_SCHEDULER)
    ours = run_scenario(diff_cluster, objects, expected, KUBESCHED)
    report = (
        f"\nkube-scheduler ({theirs.seconds:.1f} s): {_fmt(theirs)}"
        f"\nkubesched      ({ours.seconds:.1f} s): {_fmt(ours)}"
    )
    for key, allowed in expected.items():
        assert key in theirs.outcomes, f"{key} is not a pod the scenario schedules"
        assert theirs.outcomes[key][0] in allowed, (
            f"the corpus is wrong: kube-scheduler put {key} on {theirs.outcomes[key][0]}, "
            f"expected {sorted(allowed)}{report}"
        )
        assert ours.outcomes[key][0] in allowed, (
            f"kubesched put {key} on {ours.outcomes[key][0]}, expected {sorted(allowed)}{report}"
        )
    for key, (where, message) in theirs.outcomes.items():
        mine, my_message = ours.outcomes[key]
        if len(expected.get(key, ())) == 1 or where in PENDING:
            assert mine == where, f"{key}: kube-scheduler {where}, kubesched {mine}{report}"
        if where in ("Unschedulable", "SchedulerError"):
            # the whole FailedScheduling message, byte for byte (the FitError summary,
            # DynamicResources' PostFilter ". not found" and preemption's verdict; an
            # error as the framework wraps it: 'running "<plugin>" filter plugin: ...')
            assert my_message == message, f"{key}: messages differ{report}"
        if where in PENDING and mine in PENDING:
            # the nomination it is left with: cleared by a failure, or kept when
            # PostFilter ran without a result (kube's clearNominatedNode)
            assert ours.nominated[key] == theirs.nominated[key], (
                f"{key}: nominated node: kube-scheduler {theirs.nominated[key]!r}, "
                f"kubesched {ours.nominated[key]!r}{report}"
            )
    victims = expected_victims(path)
    if victims is not None:
        assert theirs.victims == victims, (
            f"the corpus is wrong: kube-scheduler evicted {sorted(theirs.victims)}, "
            f"expected {sorted(victims)}{report}"
        )
    assert ours.victims == theirs.victims, (
        f"victims differ: kube-scheduler {sorted(theirs.victims)}, "
        f"kubesched {sorted(ours.victims)}{report}"
    )


# -- the simulator against kubesched run ----------------------------------------------------------


@pytest.mark.parametrize("path", _ids())
def test_simulate_predicts_kubesched_run(diff_cluster: ControlPlane, path: pathlib.Path) -> None:
    expected = expectations(path)
    objects = load_scenarios([str(path)])
    created, pending = prepare(objects, KUBESCHED)
    predicted = simulated(created)
    ours = run_scenario(diff_cluster, objects, expected, KUBESCHED, seed=SEED)
    report = (
        "\nkubesched simulate: "
        + "; ".join(f"{k}={v[0]}" + (f" ({v[1]})" if v[1] else "") for k, v in predicted.items())
        + f"\nkubesched run:      {_fmt(ours)}"
    )
    assert sorted(predicted) == sorted(pending), f"the pods to schedule differ{report}"
    for key in pending:
        (where, message), (ran, ran_message) = predicted[key], ours.outcomes[key]
        assert where == ran, f"{key}: simulate {where}, run {ran}{report}"
        if where != "Waiting":
            # A waiting pod's message in the simulator is the queue's reason (the gates,
            # the gang's missing members); a cluster shows at most part of it (the API
            # server's SchedulingGated condition, an Event): only its status is compared.
            assert message == ran_message, f"{key}: the messages differ{report}"
