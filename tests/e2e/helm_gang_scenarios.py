"""The foreign gang APIs' scenarios of tests/e2e/test_helm_install.py (the others are in
helm_support): a gang of Kubernetes' ``scheduling.k8s.io/v1beta1`` Workload + PodGroup, and
one of scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` PodGroup, each bound whole with
its status written in its API's shape. They need a control plane serving both APIs
(``GenericWorkload``, ``scheduling.k8s.io/v1beta1`` on; scheduler-plugins' CRD installed):
:func:`gang_control_plane`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from kubesched.api.gangs import STORE_KINDS, WORKLOAD_STORE_KIND, GangAPI
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.helm_support import (
    Logs,
    Outcome,
    Scenario,
    World,
    about,
    cached,
    read,
    uid,
    wait_either,
)
from tests.e2e.support import JSON, call

UPSTREAM = "scheduling.k8s.io/v1beta1"
SCHEDULER_PLUGINS = "scheduling.x-k8s.io/v1alpha1"
X_CRD = Path(__file__).parents[1] / "crds" / "podgroups.scheduling.x-k8s.io.yaml"


def gang_control_plane(binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane serving both foreign gang APIs (the body of a fixture)."""
    with ControlPlane(
        binaries,
        feature_gates={"GenericWorkload": True},
        runtime_config={UPSTREAM: True},
    ) as cp:
        cp.kubectl("apply", "-f", str(X_CRD), check=True)
        cp.kubectl(
            "wait",
            "--for=condition=Established",
            "crd/podgroups.scheduling.x-k8s.io",
            check=True,
        )
        yield cp


def _initially_scheduled(group: JSON) -> JSON | None:
    for c in (group.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodGroupInitiallyScheduled":
            return dict(c)
    return None


async def upstream_gang(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    """Kubernetes' Workload + PodGroup (minCount 2), members joined by
    ``spec.schedulingGroup.podGroupName``: both bound, ``PodGroupInitiallyScheduled`` True."""
    tag = uid()
    workload, group = f"job-{tag}", f"up-{tag}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": UPSTREAM,
            "kind": "Workload",
            "metadata": {"name": workload, "namespace": w.ns},
            "spec": {
                "podGroupTemplates": [
                    {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}
                ]
            },
        }
    )
    w.cleanup.append(lambda: cp.api.remove(UPSTREAM, "Workload", workload, w.ns))
    cp.api.create(
        {
            "apiVersion": UPSTREAM,
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": w.ns},
            "spec": {
                "workloadRef": {"workloadName": workload, "templateName": "workers"},
                "schedulingPolicy": {"gang": {"minCount": 2}},
            },
        }
    )
    w.cleanup.append(lambda: cp.api.remove(UPSTREAM, "PodGroup", group, w.ns))
    # seen before the members (each kind comes by a watch of its own)
    await cached(w, WORKLOAD_STORE_KIND, workload)
    await cached(w, STORE_KINDS[GangAPI.UPSTREAM], group)
    members = [f"{group}-{i}" for i in range(2)]
    for m in members:
        await call(w.pod, m, schedulingGroup={"podGroupName": group})

    def status() -> JSON | None:
        return _initially_scheduled(read(cp, UPSTREAM, "PodGroup", group, w.ns) or {})

    def scheduled() -> bool:
        cond = status()
        return (
            all(w.bound(m) for m in members)
            and cond is not None
            and (cond["status"], cond["reason"]) == ("True", "Scheduled")
        )

    out = await wait_either(
        scheduled,
        logs,
        about(group, forbidden),
        f"{group} bound, PodGroupInitiallyScheduled=True",
        diagnose=lambda: (status(), [w.bound(m) for m in members]),
    )
    if not out.ok:  # bound (the gang fits), but a user sees no condition saying so
        assert await call(status) is None
    return out


async def scheduler_plugins_gang(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    """scheduler-plugins' PodGroup (minMember 2), members labelled
    ``scheduling.x-k8s.io/pod-group``: both bound, phase written (Scheduling: bound, not
    running, as there is no kubelet)."""
    group = f"x-{uid()}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": SCHEDULER_PLUGINS,
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": w.ns},
            "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30},
        }
    )
    w.cleanup.append(lambda: cp.api.remove(SCHEDULER_PLUGINS, "PodGroup", group, w.ns))
    await cached(w, STORE_KINDS[GangAPI.SCHEDULER_PLUGINS], group)  # before the members
    members = [f"{group}-{i}" for i in range(2)]
    for m in members:
        await call(w.pod, m, labels={"scheduling.x-k8s.io/pod-group": group})

    def phase() -> str | None:
        pg = read(cp, SCHEDULER_PLUGINS, "PodGroup", group, w.ns) or {}
        return (pg.get("status") or {}).get("phase")

    def scheduled() -> bool:
        return all(w.bound(m) for m in members) and phase() == "Scheduling"

    out = await wait_either(
        scheduled,
        logs,
        about(group, forbidden),
        f"{group} bound, phase Scheduling",
        diagnose=lambda: (phase(), [w.bound(m) for m in members]),
    )
    if not out.ok:
        assert await call(phase) is None
    return out


GANG_SCENARIOS: dict[str, Scenario] = {
    "upstream-gang": upstream_gang,
    "scheduler-plugins-gang": scheduler_plugins_gang,
}
