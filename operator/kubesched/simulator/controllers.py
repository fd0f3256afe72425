"""The pods a scenario's workload controllers would create, as their controllers do.

On a cluster, a ReplicaSet, Deployment, StatefulSet or Job is turned into pods by
kube-controller-manager; the scheduler then sees the pods. A scenario has no controller
manager, so :func:`expand` does its part once, before the scenario is checked, placing
each controller's pods right after it in the document order:

- ReplicaSet: ``spec.replicas`` (default 1) pods named ``<name>-<5 characters>``, owned
  by it (``ownerReferences``, controller), labelled from ``spec.template``;
- Deployment: its ReplicaSet ``<name>-<pod-template-hash>`` (the hash label added to
  the selector and the pods), which then creates the pods;
- StatefulSet: pods ``<name>-0`` ... ``<name>-<replicas-1>`` with the
  ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index`` labels,
  and a PersistentVolumeClaim ``<template>-<pod>`` per ``volumeClaimTemplates`` entry,
  mounted as the volume of that name;
- Job: ``spec.parallelism`` pods (default 1, at most ``spec.completions``) named
  ``<name>-<5 characters>``, with the ``batch.kubernetes.io/job-name`` and
  ``controller-uid`` labels.

- DaemonSet: a pod ``<name>-<5 characters>`` for each of the scenario's nodes it should
  run on (kube's NodeShouldRunDaemonPod: the template's node name, node selector and
  required node affinity match the node, and it tolerates the node's NoSchedule and
  NoExecute taints), with the tolerations the DaemonSet controller adds (not-ready and
  unreachable NoExecute; disk, memory and PID pressure, unschedulable, and for a
  ``hostNetwork`` pod network-unavailable, NoSchedule), its required node affinity
  replaced by ``metadata.name In (<node>)``, and the ``pod-template-generation`` and
  ``controller-revision-hash`` labels (the hash is not kube's).

A ReplicaSet or StatefulSet without ``spec.template`` creates nothing (see
:data:`LENIENT`). Names are deterministic (the random suffixes come from a hash of the owner and the
index), so a scenario places the same way every time. A generated pod's problems are
reported at the controller's document, naming the pod.
"""

from __future__ import annotations

import copy
import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubesched.framework.helpers import find_matching_untolerated_taint
from kubesched.framework.labels import RequiredNodeAffinity
from kubesched.framework.types import ObjectError, Pod, Taint
from kubesched.simulator.pod_checks import check_label_selector

__all__ = ["CONTROLLER_KINDS", "created_objects", "expand", "is_controller", "uid_for"]

#: kind -> apiVersion of the controllers expanded here.
CONTROLLER_KINDS = {
    "ReplicaSet": "apps/v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "DaemonSet": "apps/v1",
}
LENIENT = ("ReplicaSet", "StatefulSet")
"""Kinds that may come without ``spec.template`` (an API server would refuse that): such
a controller creates nothing and only serves PodTopologySpread's default constraints as
the controller of pods the scenario states."""
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # kube's rand.String alphabet (no vowels)
_UID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "simulate.kubesched.dev")


def uid_for(kind: str, namespace: str | None, name: str) -> str:
    """The uid a scenario object gets when it states none (stable across runs)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{namespace}/{name}"))


def _suffix(seed: str, n: int = 5) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:n])


def _template_hash(obj: Mapping[str, Any]) -> str:
    """A stable hash of a controller's pod template (a Deployment's pod-template-hash, a
    DaemonSet's controller-revision-hash; not kube's values)."""
    return _suffix(repr(sorted(obj["spec"]["template"].items())), 10)


def _count(spec: Mapping[str, Any], field: str, default: int) -> int:
    v = spec.get(field, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ObjectError(f"spec.{field}: must be a non-negative integer, got {v!r}")
    return v


def _template(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(template metadata, template spec), checked against the selector."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ObjectError("spec: required")
    tmpl = spec.get("template")
    if not isinstance(tmpl, Mapping) or not isinstance(tmpl.get("spec"), Mapping):
        raise ObjectError("spec.template.spec: required (the pods' spec)")
    meta = tmpl.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ObjectError("spec.template.metadata: expected an object")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise ObjectError("spec.template.metadata.labels: expected an object")
    sel = spec.get("selector")
    if sel is not None:
        check_label_selector(sel, "spec.selector")
        wanted = (sel or {}).get("matchLabels") or {}
        if any(labels.get(k) != v for k, v in wanted.items()):
            raise ObjectError(
                "spec.template.metadata.labels: must match spec.selector "
                f"(selector {dict(wanted)}, labels {dict(labels)})"
            )
    return dict(meta), copy.deepcopy(dict(tmpl["spec"]))


def _owner(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": CONTROLLER_KINDS[kind],
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    name: str,
    ns: str,
    meta: Mapping[str, Any],
    spec: dict[str, Any],
    owner: dict[str, Any],
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    pod_meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "labels": {**(meta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner],
    }
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def _replica_set(rs: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    meta, spec = _template(rs)
    n = _count(rs["spec"], "replicas", 1)
    owner = _owner(rs, "ReplicaSet")
    name, uid = rs["metadata"]["name"], owner["uid"]
    return [
        _pod(f"{name}-{_suffix(f'{uid}/{i}')}", ns, meta, copy.deepcopy(spec), owner)
        for i in range(n)
    ]


def _deployment(d: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    meta, spec = _template(d)
    template_hash = _template_hash(d)
    labels = {**(meta.get("labels") or {}), "pod-template-hash": template_hash}
    selector = copy.deepcopy(d["spec"].get("selector") or {})
    selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
    rs_name = f"{d['metadata']['name']}-{template_hash}"
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name,
            "namespace": ns,
            "uid": uid_for("ReplicaSet", ns, rs_name),
            "labels": labels,
            "ownerReferences": [_owner(d, "Deployment")],
        },
        "spec": {
            "replicas": _count(d["spec"], "replicas", 1),
            "selector": selector,
            "template": {"metadata": {**meta, "labels": labels}, "spec": spec},
        },
    }
    return [rs, *_replica_set(rs, ns)]


def _stateful_set(ss: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    meta, spec = _template(ss)
    n = _count(ss["spec"], "replicas", 1)
    owner = _owner(ss, "StatefulSet")
    name = ss["metadata"]["name"]
    templates = ss["spec"].get("volumeClaimTemplates") or []
    if not isinstance(templates, list):
        raise ObjectError("spec.volumeClaimTemplates: must be a list")
    out: list[dict[str, Any]] = []
    for i in range(n):
        pod_name = f"{name}-{i}"
        pod_spec = copy.deepcopy(spec)
        for j, t in enumerate(templates):
            t_name = (t.get("metadata") or {}).get("name") if isinstance(t, Mapping) else None
            if not isinstance(t_name, str) or not t_name:
                raise ObjectError(f"spec.volumeClaimTemplates[{j}].metadata.name: required")
            claim = f"{t_name}-{pod_name}"
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {
                        "name": claim,
                        "namespace": ns,
                        "labels": dict(meta.get("labels") or {}),
                    },
                    "spec": copy.deepcopy(t.get("spec") or {}),
                }
            )
            volumes = [v for v in pod_spec.get("volumes") or () if v.get("name") != t_name]
            volumes.append({"name": t_name, "persistentVolumeClaim": {"claimName": claim}})
            pod_spec["volumes"] = volumes
        labels = {
            "statefulset.kubernetes.io/pod-name": pod_name,
            "apps.kubernetes.io/pod-index": str(i),
        }
        out.append(_pod(pod_name, ns, meta, pod_spec, owner, labels))
    return out


def _job(job: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    meta, spec = _template(job)
    parallelism = _count(job["spec"], "parallelism", 1)
    completions = job["spec"].get("completions")
    n = (
        parallelism
        if completions is None
        else min(parallelism, _count(job["spec"], "completions", 1))
    )
    owner = _owner(job, "Job")
    name, uid = job["metadata"]["name"], owner["uid"]
    labels = {
        "batch.kubernetes.io/job-name": name,
        "job-name": name,
        "batch.kubernetes.io/controller-uid": uid,
        "controller-uid": uid,
    }
    return [
        _pod(f"{name}-{_suffix(f'{uid}/{i}')}", ns, meta, copy.deepcopy(spec), owner, labels)
        for i in range(n)
    ]


#: The tolerations the DaemonSet controller gives its pods (AddOrUpdateDaemonPodTolerations):
#: (key, effect); the last only for a hostNetwork pod.
DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ("node.kubernetes.io/network-unavailable", "NoSchedule"),
)


def _daemon_set(
    ds: dict[str, Any], ns: str, nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    meta, spec = _template(ds)
    wanted = DAEMON_TOLERATIONS if spec.get("hostNetwork") else DAEMON_TOLERATIONS[:-1]
    tolerations = list(spec.get("tolerations") or [])
    for key, effect in wanted:  # kept, unless the template has the same toleration
        if not any(
            t.get("key") == key and t.get("operator") == "Exists" and t.get("effect") == effect
            for t in tolerations
        ):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    spec["tolerations"] = tolerations
    owner = _owner(ds, "DaemonSet")
    name, uid = ds["metadata"]["name"], owner["uid"]
    template_hash = _template_hash(ds)
    labels = {"controller-revision-hash": template_hash, "pod-template-generation": "1"}
    view = Pod({"metadata": {"name": name, "namespace": ns}, "spec": spec})
    required = RequiredNodeAffinity.of_pod(
        view,
        strict=True,
        field="spec.template.spec.affinity.nodeAffinity."
        "requiredDuringSchedulingIgnoredDuringExecution",
    )
    out = []
    for node in nodes:
        node_name = str(node["metadata"]["name"])
        node_labels, taints = _node_view(node)
        if (
            spec.get("nodeName") not in (None, "", node_name)
            or not required.matches(node_labels, node_name)
            or find_matching_untolerated_taint(
                taints, view.tolerations, lambda t: t.effect in ("NoSchedule", "NoExecute")
            )
            is not None
        ):
            continue
        pod_spec = copy.deepcopy(spec)
        pod_spec["affinity"] = _pinned(pod_spec.get("affinity"), node_name)
        pod_name = f"{name}-{_suffix(f'{uid}/{node_name}')}"
        out.append(_pod(pod_name, ns, meta, pod_spec, owner, labels))
    return out


def _node_view(node: Mapping[str, Any]) -> tuple[dict[str, str], list[Taint]]:
    """A scenario node's labels (with the hostname label it will get) and taints; what
    cannot be read is left to the node's own checks (as none)."""
    name = str(node["metadata"]["name"])
    labels = node["metadata"].get("labels")
    labels = dict(labels) if isinstance(labels, Mapping) else {}
    labels.setdefault("kubernetes.io/hostname", name)
    spec = node.get("spec")
    try:
        taints = [Taint.from_dict(t) for t in (spec or {}).get("taints") or ()]
    except (ObjectError, AttributeError, TypeError):
        taints = []
    return labels, taints


def _pinned(affinity: Any, node_name: str) -> dict[str, Any]:
    """kube's ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity's terms
    become one, ``metadata.name In (node)``; the rest of the affinity is kept."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
    out = dict(affinity or {})
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        **(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}),
        "nodeSelectorTerms": [term],
    }
    out["nodeAffinity"] = node_affinity
    return out


_EXPANDERS = {
    "ReplicaSet": _replica_set,
    "Deployment": _deployment,
    "StatefulSet": _stateful_set,
    "Job": _job,
}


def created_objects(
    obj: dict[str, Any], nodes: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """What the controller ``obj`` creates (its metadata gets the uid it will keep);
    ``nodes`` are the scenario's, for a DaemonSet. Raises ObjectError naming the
    controller's field."""
    meta = obj["metadata"]
    ns = meta.get("namespace") or "default"
    meta.setdefault("uid", uid_for(obj["kind"], ns, meta["name"]))
    spec = obj.get("spec")
    if obj["kind"] in LENIENT and not (isinstance(spec, Mapping) and "template" in spec):
        return []  # a selector for default spreading only (its pods written by hand)
    if obj["kind"] == "DaemonSet":
        return _daemon_set(obj, ns, nodes)
    return _EXPANDERS[obj["kind"]](obj, ns)


def is_controller(obj: Any) -> bool:
    if not isinstance(obj, Mapping):
        return False
    kind = obj.get("kind")
    meta = obj.get("metadata")
    return (
        isinstance(kind, str)
        and kind in CONTROLLER_KINDS
        and CONTROLLER_KINDS[kind] == obj.get("apiVersion")
        and isinstance(meta, Mapping)
        and isinstance(meta.get("name"), str)
        and bool(meta["name"])
    )


def expand(documents: Sequence[Any], make: Any, fail: Any) -> Iterable[Any]:
    """Each document, and after a controller's the documents of what it creates:
    ``make(doc, obj)`` wraps an object as a document of ``doc``; ``fail(doc, message)``
    builds the error to raise for a controller that cannot be expanded."""
    nodes = [
        d.obj
        for d in documents
        if isinstance(d.obj, Mapping)
        and d.obj.get("kind") == "Node"
        and isinstance(d.obj.get("metadata"), Mapping)
        and isinstance(d.obj["metadata"].get("name"), str)
    ]
    for doc in documents:
        yield doc
        if not is_controller(doc.obj):
            continue
        try:
            created = created_objects(doc.obj, nodes)
        except ObjectError as e:
            raise fail(doc, str(e)) from None
        for obj in created:
            yield make(doc, obj)
