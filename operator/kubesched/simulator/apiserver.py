"""What kube-apiserver (v1.37, default admission plugins and feature gates) does to a pod
on create that the scheduler then reads, done to scenario pods so the simulator schedules
the pod a cluster would hold:

- **validation** of ``spec.topologySpreadConstraints``: a pod the API server refuses is
  refused here too (``maxSkew`` and ``minDomains`` positive, ``minDomains`` only with
  DoNotSchedule, no two constraints with the same topologyKey and whenUnsatisfiable,
  ``matchLabelKeys`` only with a ``labelSelector`` and never naming a key it has);
- the **matchLabelKeys merge** (feature MatchLabelKeysInPodTopologySpreadSelectorMerge, on
  since 1.34: each key the pod has a label for becomes ``key In (value)`` in the
  constraint's ``labelSelector.matchExpressions``) is only checked, not written: the
  scheduler merges the keys itself, to the same effect, and a pod stored merged could not
  be created again (the API server would merge a second time and refuse the duplicate);
- **DefaultTolerationSeconds** admission: a pod that does not tolerate
  ``node.kubernetes.io/not-ready`` / ``node.kubernetes.io/unreachable`` NoExecute gets a
  toleration for each (Exists, 300 s), so such taints do not keep it off a node: neither
  TaintToleration nor PodTopologySpread's ``nodeTaintsPolicy: Honor`` counts them;
- **pod-level requests** defaulting (PodLevelResources, beta): with ``spec.resources.limits``
  set, a cpu, memory or hugepages limit no container requests becomes the pod-level
  request too (for one a container requests, the API server writes the containers'
  aggregate, which is what the scheduler computes without it);
- **hostNetwork ports** defaulting: in a ``hostNetwork`` pod, each container's (and init
  container's) port without a ``hostPort`` gets its ``containerPort`` as one, so
  NodePorts sees the ports the pod takes on its node;
- **LimitRanger** admission (:mod:`kubesched.simulator.limit_ranges`): a namespace's
  LimitRanges' default limits and requests written into the pod's containers, and its
  bounds checked;
- **RuntimeClass** admission (:mod:`kubesched.simulator.runtime_classes`): the class's
  overhead and scheduling (node selector, tolerations) written into the pod;
- **PodTopologyLabels** admission (beta, on since 1.35): a pod created with
  ``spec.nodeName`` gets that node's ``topology.kubernetes.io/zone`` and ``/region``
  labels (overwriting its own);

and to a PersistentVolumeClaim: **DefaultStorageClass** admission gives a claim that names
no class (no ``spec.storageClassName``, not even ``""``, and no beta class annotation)
the default StorageClass (annotated ``storageclass.kubernetes.io/is-default-class:
"true"``, or the beta annotation; of several, the newest, then the first by name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.cluster.memory import TOPOLOGY_LABELS
from kubesched.framework.types import ObjectError
from kubesched.simulator import limit_ranges as limit_ranges_admission
from kubesched.simulator import runtime_classes as runtime_classes_admission

__all__ = ["DEFAULT_TOLERATION_SECONDS", "admit_pod", "default_storage_classes"]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
#: kube-apiserver's --default-not-ready-toleration-seconds and
#: --default-unreachable-toleration-seconds.
DEFAULT_TOLERATION_SECONDS = 300

_ACTIONS = ("DoNotSchedule", "ScheduleAnyway")
_POLICIES = ("Honor", "Ignore")
_FIELD = "spec.topologySpreadConstraints"


def admit_pod(
    pod: dict[str, Any],
    nodes: Mapping[str, Mapping[str, Any]],
    runtime_classes: Mapping[str, Mapping[str, Any]] | None = None,
    limit_ranges: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> None:
    """Validate and mutate ``pod`` (in place) as the API server would create it;
    ``nodes`` and ``runtime_classes`` are the scenario's by name, ``limit_ranges`` its
    (defaulted) LimitRanges by namespace. Raises ObjectError("field: why")."""
    meta = pod.setdefault("metadata", {})
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not isinstance(meta, dict):
        return  # the pod validator reports it
    namespace = meta.get("namespace") or "default"
    limit_ranges_admission.admit(pod, (limit_ranges or {}).get(namespace, ()))
    node_name = spec.get("nodeName")
    node = nodes.get(node_name) if isinstance(node_name, str) else None
    if node is not None:
        _copy_topology_labels(meta, node)
    labels = meta.get("labels") or {}
    constraints = spec.get("topologySpreadConstraints")
    if isinstance(constraints, list) and isinstance(labels, Mapping):
        _validate_constraints(constraints)
        for i, c in enumerate(constraints):
            _check_match_label_keys(c, labels, f"{_FIELD}[{i}]")
    _default_tolerations(spec)
    runtime_classes_admission.admit(spec, runtime_classes or {})
    _default_pod_level_requests(spec)
    if spec.get("hostNetwork") is True:
        _default_host_network_ports(spec)


def _default_host_network_ports(spec: dict[str, Any]) -> None:
    """kube's defaultHostNetworkPorts (SetDefaults_Pod)."""
    for part in ("containers", "initContainers"):
        containers = spec.get(part)
        for c in containers if isinstance(containers, list) else ():
            ports = c.get("ports") if isinstance(c, dict) else None
            for port in ports if isinstance(ports, list) else ():
                if isinstance(port, dict) and not port.get("hostPort") and "containerPort" in port:
                    port["hostPort"] = port["containerPort"]


def _pod_level(key: Any) -> bool:
    return key in ("cpu", "memory") or (isinstance(key, str) and key.startswith("hugepages-"))


def _default_pod_level_requests(spec: dict[str, Any]) -> None:
    res = spec.get("resources")
    limits = res.get("limits") if isinstance(res, dict) else None
    if not isinstance(res, dict) or not isinstance(limits, Mapping) or not limits:
        return
    requests = res.get("requests") or {}
    if not isinstance(requests, Mapping):
        return  # the pod's parser reports it
    requested: set[Any] = set()
    for field in ("containers", "initContainers"):
        for c in spec.get(field) or ():
            r = c.get("resources") if isinstance(c, Mapping) else None
            for part in ("requests", "limits"):  # a container's limit defaults its request
                given = r.get(part) if isinstance(r, Mapping) else None
                if isinstance(given, Mapping):
                    requested.update(given)
    merged = dict(requests)
    for key, limit in limits.items():
        if _pod_level(key) and key not in merged and key not in requested:
            merged[key] = limit
    if merged:
        res["requests"] = merged


def _copy_topology_labels(meta: dict[str, Any], node: Mapping[str, Any]) -> None:
    node_labels = (node.get("metadata") or {}).get("labels")
    if not isinstance(node_labels, Mapping):
        return
    copied = {k: node_labels[k] for k in TOPOLOGY_LABELS if k in node_labels}
    if copied:
        labels = meta.get("labels")
        meta["labels"] = {**(labels if isinstance(labels, Mapping) else {}), **copied}


def _positive(v: Any, field: str) -> None:
    if isinstance(v, int) and not isinstance(v, bool) and v <= 0:
        raise ObjectError(f"{field}: Invalid value: {v}: must be greater than zero")


def _validate_constraints(constraints: list[Any]) -> None:
    for i, c in enumerate(constraints):
        f = f"{_FIELD}[{i}]"
        if not isinstance(c, Mapping):
            continue  # the plugin's parser reports it
        _positive(c.get("maxSkew"), f"{f}.maxSkew")
        if not c.get("topologyKey"):
            raise ObjectError(f"{f}.topologyKey: Required value: can not be empty")
        action = c.get("whenUnsatisfiable")
        if action not in _ACTIONS:
            raise ObjectError(
                f'{f}.whenUnsatisfiable: Unsupported value: {action!r}: supported values: "'
                + '", "'.join(_ACTIONS)
                + '"'
            )
        for other in constraints[i + 1 :]:
            if (
                isinstance(other, Mapping)
                and other.get("topologyKey") == c.get("topologyKey")
                and other.get("whenUnsatisfiable") == action
            ):
                raise ObjectError(
                    f"{f}.{{topologyKey, whenUnsatisfiable}}: Duplicate value: "
                    f'"{{{c.get("topologyKey")}, {action}}}"'
                )
        if c.get("minDomains") is not None:
            _positive(c["minDomains"], f"{f}.minDomains")
            if action != "DoNotSchedule":
                raise ObjectError(
                    f"{f}.minDomains: Invalid value: {c['minDomains']}: can only use minDomains "
                    f"if whenUnsatisfiable=DoNotSchedule, not {action}"
                )
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = c.get(policy)
            if v is not None and v not in _POLICIES:
                raise ObjectError(
                    f'{f}.{policy}: Unsupported value: {v!r}: supported values: "Honor", "Ignore"'
                )
        keys = c.get("matchLabelKeys") or []
        if keys and c.get("labelSelector") is None:
            raise ObjectError(
                f"{f}.matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"
            )


def _check_match_label_keys(c: Any, pod_labels: Mapping[str, Any], field: str) -> None:
    """The API server's check, on the selector as it would merge it, that no key of
    matchLabelKeys was in the selector already."""
    if not isinstance(c, dict):
        return
    keys = c.get("matchLabelKeys") or []
    sel = c.get("labelSelector")
    if not keys or not isinstance(sel, dict) or not isinstance(keys, list):
        return
    given, match_labels = sel.get("matchExpressions"), sel.get("matchLabels")
    if not isinstance(given or [], list) or not isinstance(match_labels or {}, Mapping):
        return  # a malformed selector: the pod's parser reports it
    exprs = list(given or [])
    for k in keys:
        if isinstance(k, str) and k in pod_labels:
            exprs.append({"key": k, "operator": "In", "values": [str(pod_labels[k])]})
    seen = set(match_labels or {})
    index = {k: j for j, k in enumerate(keys) if isinstance(k, str)}
    for e in exprs:
        key = e.get("key") if isinstance(e, Mapping) else None
        if key in index and key in seen:
            raise ObjectError(
                f"{field}.matchLabelKeys[{index[key]}]: Invalid value: {key!r}: "
                "exists in both matchLabelKeys and labelSelector"
            )
        seen.add(key)


def _default_tolerations(spec: dict[str, Any]) -> None:
    tolerations = spec.get("tolerations")
    if tolerations is not None and not isinstance(tolerations, list):
        return  # the pod validator reports it
    tolerations = list(tolerations or [])
    have = {NOT_READY: False, UNREACHABLE: False}
    for t in tolerations:
        if not isinstance(t, Mapping):
            continue
        key, effect = t.get("key") or "", t.get("effect") or ""
        for taint in have:
            if key in ("", taint) and effect in ("", "NoExecute"):
                have[taint] = True
    for taint, tolerated in have.items():
        if not tolerated:
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    spec["tolerations"] = tolerations


_DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
_BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def default_storage_classes(objects: list[dict[str, Any]]) -> None:
    """Give every claim without a class the default StorageClass, in place (objects
    carry their creationTimestamp already)."""
    defaults = [
        o
        for o in objects
        if o.get("kind") == "StorageClass"
        and any(
            ((o.get("metadata") or {}).get("annotations") or {}).get(a) == "true"
            for a in _DEFAULT_CLASS_ANNOTATIONS
        )
    ]
    if not defaults:
        return
    # newest first (RFC 3339 UTC timestamps of one format sort as text), then by name
    defaults.sort(key=lambda o: o["metadata"]["name"])
    defaults.sort(key=lambda o: str(o["metadata"].get("creationTimestamp") or ""), reverse=True)
    name = defaults[0]["metadata"]["name"]
    for o in objects:
        if o.get("kind") != "PersistentVolumeClaim":
            continue
        spec = o.get("spec")
        annotations = (o.get("metadata") or {}).get("annotations") or {}
        beta = isinstance(annotations, Mapping) and _BETA_CLASS_ANNOTATION in annotations
        if isinstance(spec, dict) and spec.get("storageClassName") is None and not beta:
            spec["storageClassName"] = name
