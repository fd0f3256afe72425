"""A gang workload's PodGroups on a real API server, as Kubernetes' own gang API.

On the ``cluster`` target a plan's gangs are created as ``scheduling.k8s.io/v1beta1``
objects, for kube-scheduler (its native gang scheduling, the GenericWorkload feature)
and for kubesched alike, so both schedule the same gangs from the same objects:

- Workloads ``bench-gangs-<i>`` with a ``podGroupTemplates`` entry per gang size
  (``gang-of-N``, policy ``gang.minCount: N``; kube-apiserver allows 8 per Workload);
- a PodGroup per gang, ``spec.workloadRef`` naming its size's template and the policy
  copied into it (as a workload controller does; kube-apiserver wants a policy on every
  PodGroup);
- each member pod joins with ``spec.schedulingGroup.podGroupName`` and loses the plan's
  ``kubesched.dev/pod-group`` label (which would make it a member of a second gang
  API for kubesched).

kubesched reads the upstream objects too, not its own ``kubesched.dev`` PodGroups: the
same gangs either way, and the comparison is of the schedulers, not of two APIs. The
bench's own control plane serves the API when the plan has gangs (:data:`FEATURE_GATES`,
:data:`RUNTIME_CONFIG`, on kube-apiserver and kube-scheduler); on a cluster given by
``--kubeconfig`` that does not serve it, kubesched gets its own PodGroups and
kube-scheduler the members without any (the document's ``notes`` say so).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubesched.simulator.templates import GANG_LABEL

__all__ = [
    "FEATURE_GATES",
    "MAX_TEMPLATES",
    "RUNTIME_CONFIG",
    "UPSTREAM",
    "WORKLOAD_NAME",
    "as_member",
    "feature_gates_flag",
    "runtime_config_flag",
    "upstream_objects",
]

UPSTREAM = "scheduling.k8s.io/v1beta1"
#: What kube-scheduler 1.37 needs for its gang scheduling: GenericWorkload (beta, off by
#: default) serves the API, keeps ``spec.schedulingGroup`` on pods and enables the
#: GangScheduling plugin; TopologyAwareWorkloadScheduling (alpha) its topology plugin.
FEATURE_GATES = {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}
#: Beta APIs are served only when asked.
RUNTIME_CONFIG = {UPSTREAM: True}
WORKLOAD_NAME = "bench-gangs"


def _flag(values: Mapping[str, bool]) -> str:
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in values.items())


def feature_gates_flag() -> str:
    return f"--feature-gates={_flag(FEATURE_GATES)}"


def runtime_config_flag() -> str:
    return f"--runtime-config={_flag(RUNTIME_CONFIG)}"


#: kube-apiserver's limit on a Workload's ``podGroupTemplates``.
MAX_TEMPLATES = 8


def _template(size: int) -> str:
    return f"gang-of-{size}"


def upstream_objects(gangs: Mapping[str, int]) -> list[dict[str, Any]]:
    """The Workloads (``bench-gangs-<i>``: at most :data:`MAX_TEMPLATES` templates each,
    a template per gang size), then a PodGroup per gang (name -> members), in the
    plan's order."""
    sizes = sorted(set(gangs.values()))
    workload_of = {size: f"{WORKLOAD_NAME}-{i // MAX_TEMPLATES}" for i, size in enumerate(sizes)}
    out: list[dict[str, Any]] = []
    for first in range(0, len(sizes), MAX_TEMPLATES):
        chunk = sizes[first : first + MAX_TEMPLATES]
        out.append(
            {
                "apiVersion": UPSTREAM,
                "kind": "Workload",
                "metadata": {"name": workload_of[chunk[0]]},
                "spec": {
                    "podGroupTemplates": [
                        {"name": _template(n), "schedulingPolicy": {"gang": {"minCount": n}}}
                        for n in chunk
                    ]
                },
            }
        )
    for name, size in gangs.items():
        out.append(
            {
                "apiVersion": UPSTREAM,
                "kind": "PodGroup",
                "metadata": {"name": name},
                "spec": {
                    "workloadRef": {
                        "workloadName": workload_of[size],
                        "templateName": _template(size),
                    },
                    "schedulingPolicy": {"gang": {"minCount": size}},
                },
            }
        )
    return out


def as_member(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a plan's pod joining its gang through ``spec.schedulingGroup`` (a pod
    outside gangs is returned as is)."""
    out = copy.deepcopy(dict(pod))
    labels = (out.get("metadata") or {}).get("labels") or {}
    group = labels.pop(GANG_LABEL, None)
    if group is not None:
        out.setdefault("spec", {})["schedulingGroup"] = {"podGroupName": str(group)}
    return out


async def served(request: Any) -> bool:
    """Whether the API server serves Workload and PodGroup of :data:`UPSTREAM`
    (``request``: an awaitable ``(method, path)`` returning the decoded body, raising on
    an error status)."""
    try:
        listing = await request("GET", f"/apis/{UPSTREAM}")
    except Exception:
        return False
    names = {r.get("name") for r in (listing or {}).get("resources") or ()}
    return {"workloads", "podgroups"} <= names
