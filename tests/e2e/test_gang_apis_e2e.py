"""The three gang APIs on a real kube-apiserver 1.37 (``GenericWorkload`` on,
``scheduling.k8s.io/v1beta1`` served), one ``kubesched run``:

* Kubernetes' Workload + PodGroup, pods joined by ``spec.schedulingGroup.podGroupName``:
  bound whole, ``PodGroupInitiallyScheduled=True`` (reason ``Scheduled``); a gang that
  fits nowhere: nothing bound, ``False``/``Unschedulable`` saying why;
* ours (``kubesched.dev``): bound, phase ``Scheduled``;
* scheduler-plugins' PodGroup, whose CRD is installed only after ``kubesched run``
  started: picked up by discovery without a restart, bound, phase and counts written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.e2e import support
from tests.e2e.support import JSON, call, install_crds, local_settings, running

pytestmark = pytest.mark.timeout(240)


async def eventually(check: Callable[[], Any], *, what: str) -> Any:
    """:func:`support.eventually`, 30 s (API discovery is polled)."""
    return await support.eventually(check, within=30.0, what=what)


ROOT = Path(__file__).parents[2]
X_CRD = ROOT / "tests" / "crds" / "podgroups.scheduling.x-k8s.io.yaml"
UP = "scheduling.k8s.io/v1beta1"
X = "scheduling.x-k8s.io/v1alpha1"
NS = "gangs"


class _FastDiscovery(list[Runtime]):
    """``run``'s runtime hook: poll discovery every second, not every 30 s."""

    def append(self, rt: Runtime) -> None:
        rt.gang_sources.interval = 1.0
        super().append(rt)


@pytest.fixture
def cp(controlplane_factory: Callable[..., ControlPlane]) -> ControlPlane:
    plane = controlplane_factory(
        feature_gates={"GenericWorkload": True},
        runtime_config={UP: True},
    )
    install_crds(plane)
    plane.ensure_namespace(NS)
    return plane


@pytest.fixture
async def kubesched(cp: ControlPlane, caplog: pytest.LogCaptureFixture) -> AsyncIterator[Runtime]:
    caplog.set_level(logging.INFO, "kubesched.operator.gang_sources")
    async with running(local_settings(cp.kubeconfig), hook=_FastDiscovery()) as started:
        yield started.runtime


def apply(cp: ControlPlane, *objs: JSON) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    out = cp.kubectl("apply", "-n", NS, "-f", "-", input=json.dumps(doc))
    assert out.returncode == 0, out.stderr


def pods(
    group: str, n: int, cpu: str, *, labels: JSON | None = None, upstream: bool = False
) -> list[JSON]:
    out = []
    for i in range(n):
        spec: JSON = {
            "schedulerName": "kubesched",
            "containers": [
                {
                    "name": "w",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
        }
        if upstream:
            spec["schedulingGroup"] = {"podGroupName": group}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{group}-{i}", "labels": {"job": group, **(labels or {})}},
                "spec": spec,
            }
        )
    return out


def bound(cp: ControlPlane, group: str) -> list[str]:
    listed = cp.api.list("v1", "Pod", NS, labelSelector=f"job={group}")
    return [p["spec"]["nodeName"] for p in listed if p["spec"].get("nodeName")]


def condition(cp: ControlPlane, name: str) -> JSON:
    pg = cp.api.read(UP, "PodGroup", name, NS)
    for c in (pg.get("status") or {}).get("conditions") or ():
        if c["type"] == "PodGroupInitiallyScheduled":
            return dict(c)
    return {}


async def _upstream_gangs(cp: ControlPlane) -> None:
    """Kubernetes' own: a Workload and its PodGroups, members by spec.schedulingGroup;
    one gang that fits and binds, one that cannot and says why on its condition."""
    workload = {
        "apiVersion": UP,
        "kind": "Workload",
        "metadata": {"name": "job"},
        "spec": {
            "podGroupTemplates": [
                {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}
            ]
        },
    }

    def up_group(name: str, n: int) -> JSON:
        return {
            "apiVersion": UP,
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {
                "workloadRef": {"workloadName": "job", "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minCount": n}},
            },
        }

    await call(apply, cp, workload, up_group("train", 3), *pods("train", 3, "1", upstream=True))
    await eventually(lambda: len(bound(cp, "train")) == 3, what="the upstream gang bound")
    cond = await eventually(
        lambda: (c := condition(cp, "train")).get("status") == "True" and c, what="condition"
    )
    assert (cond["reason"], cond["message"]) == ("Scheduled", "")
    # 1.37's PodGroup registry sets no metadata.generation, so kube-scheduler's
    # observedGeneration (pg.Generation) is 0 and omitted: the same here.
    pg = await call(cp.api.read, UP, "PodGroup", "train", NS)
    assert "generation" not in pg["metadata"] and "observedGeneration" not in cond

    await call(apply, cp, up_group("huge", 2), *pods("huge", 2, "5", upstream=True))
    cond = await eventually(
        lambda: (c := condition(cp, "huge")).get("status") == "False" and c, what="condition"
    )
    assert cond["reason"] == "Unschedulable"
    assert "members fit" in cond["message"] and "Insufficient cpu" in cond["message"]
    assert await call(bound, cp, "huge") == []


async def test_a_gang_of_each_api_binds_and_its_status_is_written_in_that_apis_shape(
    cp: ControlPlane, kubesched: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    await call(cp.create_nodes, 2, cpu="4")
    started = "\n".join(r.getMessage() for r in caplog.get_records("setup"))
    assert f"{UP} PodGroup, {UP} Workload; not served: {X} PodGroup" in started

    await _upstream_gangs(cp)

    # -- ours ------------------------------------------------------------------------------
    ours = {"apiVersion": "kubesched.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "ours"}, "spec": {"minMember": 2}}  # fmt: skip
    await call(apply, cp, ours, *pods("ours", 2, "1", labels={"kubesched.dev/pod-group": "ours"}))
    await eventually(lambda: len(bound(cp, "ours")) == 2, what="our gang bound")
    await eventually(
        lambda: (
            (cp.api.read("kubesched.dev/v1alpha1", "PodGroup", "ours", NS).get("status") or {}).get(
                "phase"
            )
            == "Scheduled"
        ),
        what="our PodGroup Scheduled",
    )

    # -- scheduler-plugins: its CRD installed now, picked up without a restart --------------
    await call(cp.kubectl, "apply", "-f", X_CRD, check=True)
    await call(
        cp.kubectl, "wait", "--for=condition=Established",
        "crd/podgroups.scheduling.x-k8s.io", check=True,
    )  # fmt: skip
    await eventually(
        lambda: "PodGroup.scheduling.x-k8s.io" in kubesched.gang_sources.running,
        what="discovery to pick up scheduler-plugins' PodGroup",
    )
    assert f"{UP} Workload, {X} PodGroup" in caplog.text  # "gang APIs served: ..." again
    x_group = {"apiVersion": X, "kind": "PodGroup", "metadata": {"name": "tf"},
               "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30}}  # fmt: skip
    await call(
        apply, cp, x_group, *pods("tf", 2, "1", labels={"scheduling.x-k8s.io/pod-group": "tf"})
    )
    await eventually(lambda: len(bound(cp, "tf")) == 2, what="the scheduler-plugins gang bound")
    # bound but not running (no kubelet): scheduler-plugins' phase is Scheduling. Waited
    # for: the status is written apart from the binds (debounced), and a phase written
    # before the members were all seen (Pending) can still be there when both are bound.
    status = await eventually(
        lambda: (
            (s := cp.api.read(X, "PodGroup", "tf", NS).get("status") or {}).get("phase")
            == "Scheduling"
            and s
        ),
        what="scheduler-plugins status, phase Scheduling",
    )
    assert status["scheduleStartTime"]
    assert status.get("running", 0) == 0
