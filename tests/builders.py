"""Fluent builders for test objects: ``make_pod("p").req(cpu="1").obj()``.

Builders produce plain dicts (what the API server would send); ``.pod()`` / ``.node()``
wrap them in the scheduler's views.
"""

from __future__ import annotations

import itertools
from typing import Any

from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.types import Node, Pod

_uid = itertools.count(1)


class PodBuilder:
    def __init__(self, name: str, namespace: str = "default") -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}-{next(_uid)}"},
            "spec": {"containers": [{"name": "c", "image": "pause"}], "schedulerName": "kubesched"},
            "status": {"phase": "Pending"},
        }

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._obj["spec"]
        return spec

    @property
    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._obj["metadata"]
        return meta

    def uid(self, uid: str) -> PodBuilder:
        self._meta["uid"] = uid
        return self

    def req(self, **resources: str | int) -> PodBuilder:
        """Requests of the first container; ``ephemeral_storage`` for ephemeral-storage."""
        rl = {k.replace("_", "-"): str(v) for k, v in resources.items()}
        self._spec["containers"][0].setdefault("resources", {})["requests"] = rl
        return self

    def lim(self, **resources: str | int) -> PodBuilder:
        rl = {k.replace("_", "-"): str(v) for k, v in resources.items()}
        self._spec["containers"][0].setdefault("resources", {})["limits"] = rl
        return self

    def container(self, image: str = "pause", **requests: str) -> PodBuilder:
        c: dict[str, Any] = {"name": f"c{len(self._spec['containers'])}", "image": image}
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        self._spec["containers"].append(c)
        return self

    def init_container(self, sidecar: bool = False, **requests: str) -> PodBuilder:
        c: dict[str, Any] = {
            "name": f"i{len(self._spec.get('initContainers', []))}",
            "image": "init",
        }
        if sidecar:
            c["restartPolicy"] = "Always"
        if requests:
            c["resources"] = {"requests": {k.replace("_", "-"): v for k, v in requests.items()}}
        self._spec.setdefault("initContainers", []).append(c)
        return self

    def overhead(self, **resources: str) -> PodBuilder:
        self._spec["overhead"] = {k.replace("_", "-"): v for k, v in resources.items()}
        return self

    def image(self, image: str) -> PodBuilder:
        self._spec["containers"][0]["image"] = image
        return self

    def priority(self, p: int) -> PodBuilder:
        self._spec["priority"] = p
        return self

    def preemption_policy(self, policy: str) -> PodBuilder:
        self._spec["preemptionPolicy"] = policy
        return self

    def scheduler(self, name: str) -> PodBuilder:
        self._spec["schedulerName"] = name
        return self

    def node(self, node_name: str) -> PodBuilder:
        self._spec["nodeName"] = node_name
        self._obj["status"]["phase"] = "Running"
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._obj["status"]["phase"] = phase
        return self

    def nominated(self, node_name: str) -> PodBuilder:
        self._obj["status"]["nominatedNodeName"] = node_name
        return self

    def labels(self, **labels: str) -> PodBuilder:
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def node_selector(self, **sel: str) -> PodBuilder:
        self._spec["nodeSelector"] = dict(sel)
        return self

    def toleration(
        self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
    ) -> PodBuilder:
        t = {"key": key, "operator": operator, "value": value, "effect": effect}
        self._spec.setdefault("tolerations", []).append({k: v for k, v in t.items() if v})
        return self

    def host_port(self, port: int, protocol: str = "TCP", ip: str = "") -> PodBuilder:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
        if ip:
            p["hostIP"] = ip
        self._spec["containers"][0].setdefault("ports", []).append(p)
        return self

    def gate(self, name: str) -> PodBuilder:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def affinity(self, affinity: dict[str, Any]) -> PodBuilder:
        self._spec["affinity"] = affinity
        return self

    def spec(self, **fields: Any) -> PodBuilder:
        self._spec.update(fields)
        return self

    def volume(self, name: str, **source: Any) -> PodBuilder:
        """A volume: ``.volume("d", gcePersistentDisk={"pdName": "x"})``."""
        self._spec.setdefault("volumes", []).append({"name": name, **source})
        return self

    def pvc(self, claim: str, volume: str = "") -> PodBuilder:
        """A PersistentVolumeClaim volume (named after the claim unless ``volume``)."""
        return self.volume(volume or claim, persistentVolumeClaim={"claimName": claim})

    def obj(self) -> dict[str, Any]:
        return self._obj

    def pod(self) -> Pod:
        return Pod(self._obj)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": f"node-{name}",
                "labels": {"kubernetes.io/hostname": name},
            },
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}},
        }

    def capacity(self, **resources: str | int) -> PodBuilder | NodeBuilder:
        alloc = {k.replace("_", "-"): str(v) for k, v in resources.items()}
        self._obj["status"]["allocatable"] = alloc
        self._obj["status"]["capacity"] = dict(alloc)
        return self

    def alloc(self, **resources: str | int) -> NodeBuilder:
        """Replace the allocatable list (pods defaults to 110 unless given)."""
        alloc = {"pods": "110"}
        alloc.update({k.replace("_", "-"): str(v) for k, v in resources.items()})
        self._obj["status"]["allocatable"] = alloc
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._obj["metadata"]["labels"][key] = value
        return self

    def zone(self, zone: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/zone", zone)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        t: dict[str, Any] = {"key": key, "effect": effect}
        if value:
            t["value"] = value
        self._obj["spec"].setdefault("taints", []).append(t)
        return self

    def unschedulable(self, flag: bool = True) -> NodeBuilder:
        self._obj["spec"]["unschedulable"] = flag
        return self

    def image(self, name: str, size: int) -> NodeBuilder:
        self._obj["status"].setdefault("images", []).append({"names": [name], "sizeBytes": size})
        return self

    def obj(self) -> dict[str, Any]:
        return self._obj

    def node(self) -> Node:
        return Node(self._obj)

    def info(self, *pods: Pod) -> NodeInfo:
        ni = NodeInfo(Node(self._obj))
        for p in pods:
            ni.add_pod(p)
        return ni


def make_pod(name: str, namespace: str = "default") -> PodBuilder:
    return PodBuilder(name, namespace)


def make_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)
