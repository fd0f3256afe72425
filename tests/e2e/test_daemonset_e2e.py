"""A scenario's DaemonSet against the real DaemonSet controller: the simulator expands it
(``kubesched.simulator.controllers``) into the pods kube-controller-manager's
daemonset-controller creates on a real kube-apiserver 1.37 with the same nodes: on the
same nodes, with the same tolerations and the same node affinity."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kubesched.simulator.scenario import load_scenarios
from tests.controlplane import ControlPlane
from tests.e2e.scenario_cluster import apply, prepare

JSON = dict[str, Any]

SCENARIO = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {pool: a}}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {pool: a}}
spec: {unschedulable: true}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n3, labels: {pool: b}}
spec: {taints: [{key: gpu, value: "yes", effect: NoSchedule}]}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n4, labels: {pool: c}}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n5, labels: {pool: b}}
spec: {taints: [{key: maint, effect: NoExecute}]}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: v1
kind: Node
metadata: {name: n6, labels: {pool: a}}
spec: {taints: [{key: node.kubernetes.io/memory-pressure, effect: NoSchedule}]}
status: {capacity: {cpu: '4', memory: 4Gi, pods: '110'}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [a, b]}]}]
          preferredDuringSchedulingIgnoredDuringExecution:
          - {weight: 5, preference: {matchExpressions: [{key: pool, operator: In, values: [a]}]}}
      containers: [{name: c, image: agent, resources: {requests: {cpu: 100m}}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: gpu-net}
spec:
  selector: {matchLabels: {app: gpu-net}}
  template:
    metadata: {labels: {app: gpu-net}}
    spec:
      hostNetwork: true
      nodeSelector: {pool: b}
      tolerations: [{key: gpu, operator: Exists}]
      containers: [{name: c, image: net}]
"""


def _target(pod: JSON) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    (term,) = terms["nodeSelectorTerms"]
    (field,) = term["matchFields"]
    return str(field["values"][0])


def _shape(pod: JSON) -> tuple[str, str, Any, Any]:
    """What a daemon pod is, beyond its generated name."""
    owner = pod["metadata"]["ownerReferences"][0]["name"]
    tolerations = sorted(
        (t.get("key", ""), t.get("operator", ""), t.get("effect", ""))
        for t in pod["spec"].get("tolerations") or ()
        if "tolerationSeconds" not in t  # DefaultTolerationSeconds' (the API server's)
    )
    return owner, _target(pod), tolerations, pod["spec"]["affinity"]


def test_daemon_pods_are_the_daemonset_controllers(
    controlplane_factory: Callable[..., ControlPlane], tmp_path: Path
) -> None:
    path = tmp_path / "ds.yaml"
    path.write_text(SCENARIO)
    objects = load_scenarios([str(path)])
    ours = sorted(_shape(o) for o in objects if o["kind"] == "Pod")
    assert [(o, n) for o, n, _, _ in ours] == [
        ("agent", "n1"),
        ("agent", "n2"),
        ("agent", "n6"),
        ("gpu-net", "n3"),
    ]
    cp = controlplane_factory()
    created, _ = prepare([o for o in objects if o["kind"] != "Pod"], "default-scheduler")
    apply(cp.api, created)
    cp.start_controller_manager(["daemonset-controller"])
    deadline = time.monotonic() + 60
    pods: list[JSON] = []
    while time.monotonic() < deadline:
        pods = cp.api.list("v1", "Pod", "default")
        if len(pods) >= len(ours):
            time.sleep(2)  # and no more come
            pods = cp.api.list("v1", "Pod", "default")
            break
        time.sleep(0.5)
    theirs = sorted(_shape(p) for p in pods)
    assert theirs == ours, yaml.safe_dump({"kube": theirs, "simulator": ours})
