"""Differential gang test: the upstream gang scenarios (``scheduling.k8s.io/v1beta1``
Workload + PodGroup, pods joined by ``spec.schedulingGroup.podGroupName``) on a real
kube-apiserver 1.37, scheduled once by kube-scheduler 1.37 with its own gang scheduling
on and once by ``kubesched run``.

The control plane runs with the feature gates kube-scheduler's gang plugins need:
``GenericWorkload`` (beta in 1.37, off by default) serves the API on kube-apiserver,
keeps ``spec.schedulingGroup`` on pods and enables the GangScheduling plugin (and the
pod-group queue) in kube-scheduler's default profile; ``TopologyAwareWorkloadScheduling``
(alpha) adds the TopologyPlacementGenerator plugin that honours
``schedulingConstraints.topology``; ``DRAWorkloadResourceClaims`` (beta, off by default)
keeps a PodGroup's ``spec.resourceClaims``, for which the real resourceclaim controller
(kube-controller-manager, running here) makes the PodGroup's claim and names it in the
members' status, and kube-scheduler reserves it for the PodGroup. ``scheduling.k8s.io/v1beta1`` is turned on with
``--runtime-config`` (beta APIs are not served by default). The control plane hands the
same gates to kube-apiserver and to kube-scheduler.

Each scenario is the file's ``# expect:`` line (see test_differential): kube-scheduler's
outcome must satisfy it (this validates the corpus), kubesched's too; both leave the
same gangs bound or pending (pod by pod: bound, Unschedulable or Waiting) and, where the
expectation names one node, put the member there; the members left over by a placed
group fail with the same message; pending members are left with the same nominated
node. Nothing is ever bound below its minimum: a gang's members are bound at least
``minCount`` at a time, or none.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.differential_support import (
    CORPUS,
    KUBE_SCHEDULER,
    KUBESCHED,
    PENDING,
    Run,
    expectations,
    expected_victims,
    run_scenario,
    uses_upstream_gangs,
)
from tests.e2e.gang_support import gang_control_plane, gangs_of, minimums_of, wipe_upstream

pytestmark = pytest.mark.timeout(180)

FILES = [p for p in sorted((CORPUS / "gang").glob("*.yaml")) if uses_upstream_gangs(p)]


@pytest.fixture(scope="module")
def gang_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with gang_control_plane(controlplane_binaries) as cp:
        yield cp


def _fmt(run: Run) -> str:
    return "; ".join(
        f"{k}={v[0]}" + (f" ({v[1]})" if v[1] else "") for k, v in run.outcomes.items()
    )


def _run(cp: ControlPlane, path: pathlib.Path, scheduler: str) -> Run:
    wipe_upstream(cp.api)
    objects = load_scenarios([str(path)])
    return run_scenario(cp, objects, expectations(path), scheduler)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in FILES])
def test_kube_scheduler_gangs_and_kubesched_agree(
    gang_cluster: ControlPlane, path: pathlib.Path
) -> None:
    expected = expectations(path)
    objects = load_scenarios([str(path)])
    gangs, minimums = gangs_of(objects), minimums_of(objects)
    theirs = _run(gang_cluster, path, KUBE_SCHEDULER)
    ours = _run(gang_cluster, path, KUBESCHED)
    report = (
        f"\nkube-scheduler ({theirs.seconds:.1f} s): {_fmt(theirs)}"
        f"\nkubesched      ({ours.seconds:.1f} s): {_fmt(ours)}"
    )
    for key, allowed in expected.items():
        assert theirs.outcomes[key][0] in allowed, (
            f"the corpus is wrong: kube-scheduler put {key} on {theirs.outcomes[key][0]}, "
            f"expected {sorted(allowed)}{report}"
        )
        assert ours.outcomes[key][0] in allowed, (
            f"kubesched put {key} on {ours.outcomes[key][0]}, expected {sorted(allowed)}{report}"
        )
    for key, (where, _) in theirs.outcomes.items():
        mine = ours.outcomes[key][0]
        if len(expected.get(key, ())) == 1 or where in PENDING:
            assert mine == where, f"{key}: kube-scheduler {where}, kubesched {mine}{report}"
        if where in PENDING and mine in PENDING:
            # the nomination a pending member is left with (kube's
            # submitPodGroupAlgorithmResult: cleared for a member that fitted in a
            # rejected group, kept for one that did not, set by a pod group preemption)
            assert ours.nominated[key] == theirs.nominated[key], (
                f"{key}: nominated node: kube-scheduler {theirs.nominated[key]!r}, "
                f"kubesched {ours.nominated[key]!r}{report}"
            )
    for members in gangs.values():
        if any(theirs.outcomes[m][0] not in PENDING for m in members):
            # a placed group's members left over failed alone: kube's own FitError each
            # (no preemption for a member of a pod group cycle)
            for m in members:
                if theirs.outcomes[m][0] == "Unschedulable" == ours.outcomes[m][0]:
                    assert ours.outcomes[m][1] == theirs.outcomes[m][1], (
                        f"{m}: messages differ{report}"
                    )
    for run in (theirs, ours):
        for group, members in gangs.items():
            bound = [m for m in members if run.outcomes[m][0] not in PENDING]
            assert not bound or len(bound) >= minimums.get(group, len(members)), (
                f"{run.scheduler} bound {group} below its minimum: {bound}{report}"
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
