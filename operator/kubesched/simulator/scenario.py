"""Scenario files: multi-document YAML of ordinary Kubernetes objects, validated and defaulted.

A scenario is read completely and checked before anything runs: one bad object fails
the whole load with a :class:`ScenarioError` naming the file, the document (0-based,
counting every ``---`` section, empty ones too), the object and the field, e.g.::

    scenario.yaml document 2 (Pod default/web-1): spec.containers[0].resources.requests.cpu: ...

Objects are then defaulted the way the API server (and, for nodes, the kubelet) would:

- ``metadata.namespace`` is ``default`` for namespaced kinds and dropped for the others;
  ``metadata.generateName`` without a name gets a deterministic suffix;
- ``metadata.uid`` (kept if given), ``metadata.creationTimestamp`` (one second apart, in
  document order) and ``metadata.resourceVersion`` are set;
- Kubernetes' PodGroups (``scheduling.k8s.io/v1beta1``): ``spec.priority`` as for pods;
- pods: ``spec.priority`` and ``spec.preemptionPolicy`` come from the PriorityClass named
  by ``spec.priorityClassName`` (the ``globalDefault`` class when none is named, priority 0
  when there is none); a ``schedulerName`` that is missing or ``default-scheduler`` means
  kubesched's default profile and becomes ``kubesched``; ``status.phase`` is ``Pending``
  (``Running`` for pods already bound through ``spec.nodeName``);
- nodes: ``status.allocatable`` defaults to ``status.capacity`` and the
  ``kubernetes.io/hostname`` label to the node's name;
- pods: what kube-apiserver's admission and defaulting add on create
  (:mod:`kubesched.simulator.apiserver`: default not-ready/unreachable tolerations,
  topology labels of the node a pod is created on), and its validation of topology
  spread constraints (matchLabelKeys checked as it would merge them);
- persistent volume claims that name no class: the default StorageClass (admission
  plugin DefaultStorageClass).

Where the simulator is more lenient than an API server, on purpose:
PriorityClasses may be defined after the pods that use them (the whole scenario exists
before the first scheduling cycle); a pod may state ``spec.priority`` without naming a
class; namespaces need not be declared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import yaml

from kubesched.api import gangs
from kubesched.api.meta import rfc3339
from kubesched.framework.types import DEFAULT_SCHEDULER_NAME, ObjectError
from kubesched.simulator import apiserver, controllers, storage_kinds
from kubesched.simulator import limit_ranges as limit_ranges_admission
from kubesched.simulator.kinds import (
    BUILTIN_PRIORITY_CLASSES,
    PREEMPTION_POLICIES,
    SUPPORTED_KINDS,
    KindSpec,
    validate_priority_class,
)

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "SUPPORTED_KINDS",
    "Document",
    "KindSpec",
    "ScenarioError",
    "load_scenarios",
    "parse_documents",
    "prepare",
    "read_documents",
]

#: The scheduler name kubesched's default profile serves.
KUBESCHED_SCHEDULER_NAME = "kubesched"

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ScenarioError(ValueError):
    """A scenario that cannot be simulated; the message names file, document and field."""


@dataclass(slots=True)
class Document:
    """One object of a scenario and where it came from."""

    source: str
    """The file as the user named it, or e.g. ``workload SchedulingBasic``."""
    index: int
    """0-based position in the YAML stream, counting empty documents too."""
    obj: Any
    item: int | None = None
    """The position in ``items`` when the document was a ``kind: List``."""
    created_by: str = ""
    """For an object a controller of the scenario creates (e.g. ``ReplicaSet team/web``)."""

    def where(self) -> str:
        w = f"{self.source} document {self.index}"
        w = w if self.item is None else f"{w} items[{self.item}]"
        return f"{w}, created by {self.created_by}" if self.created_by else w


# --- reading ---------------------------------------------------------------------------


def _to_json_data(obj: Any) -> Any:
    """Plain JSON data: timestamps YAML parsed become RFC 3339 strings, aliases unshared."""
    return orjson.loads(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS))


def read_documents(path: str) -> list[Document]:
    """Parse one scenario file into documents (``kind: List`` expanded, empty ones skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_documents(text, path)


def parse_documents(text: str, path: str) -> list[Document]:
    """Parse YAML text (read from ``path``, e.g. ``-`` for stdin) into documents."""
    docs: list[Document] = []
    index = 0
    try:
        for raw in yaml.safe_load_all(text):
            if raw is not None:
                try:
                    data = _to_json_data(raw)
                except TypeError as e:
                    raise ScenarioError(
                        f"{path} document {index}: not representable as JSON ({e})"
                    ) from None
                docs.extend(_expand(path, index, data))
            index += 1
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        context, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and cmark is not None and cmark.line != getattr(mark, "line", None):
            problem += (
                f" ({context} that starts at line {cmark.line + 1}, column {cmark.column + 1})"
            )
        raise ScenarioError(f"{path} document {index}: invalid YAML{at}: {problem}") from None
    return docs


def _expand(path: str, index: int, data: Any) -> Iterable[Document]:
    if isinstance(data, dict) and data.get("kind") == "List":
        items = data.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise ScenarioError(f"{path} document {index} (List): items: expected a list")
        return [Document(path, index, item, i) for i, item in enumerate(items)]
    return [Document(path, index, data)]


# --- validation and defaulting -----------------------------------------------------------


def _ref(kind: str, namespace: str | None, name: str) -> str:
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


@dataclass(slots=True)
class _Checked:
    doc: Document
    obj: dict[str, Any]
    kind: str
    namespace: str | None
    name: str

    def fail(self, message: str) -> ScenarioError:
        return ScenarioError(
            f"{self.doc.where()} ({_ref(self.kind, self.namespace, self.name)}): {message}"
        )


def _check_identity(doc: Document, seq: int) -> _Checked:
    """apiVersion, kind and metadata.name: what every object needs before anything else."""
    obj = doc.obj

    def fail(message: str, ref: str = "") -> ScenarioError:
        return ScenarioError(f"{doc.where()}{f' ({ref})' if ref else ''}: {message}")

    if not isinstance(obj, dict):
        raise fail(f"expected a Kubernetes object (a mapping), got {type(obj).__name__}")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise fail("apiVersion: required")
    if not isinstance(kind, str) or not kind:
        raise fail("kind: required")
    meta = obj.get("metadata")
    if meta is None:
        raise fail("metadata.name: required", kind)
    if not isinstance(meta, dict):
        raise fail("metadata: expected an object", kind)
    name = meta.get("name")
    if not name and isinstance(meta.get("generateName"), str) and meta["generateName"]:
        # The API server appends 5 random characters; the simulator stays deterministic.
        name = meta["name"] = f"{meta['generateName']}{seq:05d}"
    if not isinstance(name, str) or not name:
        raise fail("metadata.name: required", kind)
    spec = SUPPORTED_KINDS.get(kind)
    if spec is None:
        supported = ", ".join(SUPPORTED_KINDS)
        raise fail(f"kind: unsupported kind {kind!r} (supported: {supported})", f"{kind} {name}")
    if spec.namespaced:
        ns = meta.get("namespace") or "default"
        if not isinstance(ns, str):
            raise fail("metadata.namespace: must be a string", f"{kind} {name}")
        meta["namespace"] = ns
        namespace: str | None = ns
    else:
        meta.pop("namespace", None)
        namespace = None
    checked = _Checked(doc, obj, kind, namespace, name)
    if api_version not in spec.api_versions:
        raise checked.fail(
            f"apiVersion: {kind} is served as {' or '.join(spec.api_versions)}, got {api_version!r}"
        )
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        raise checked.fail(
            f"metadata.name: invalid name {name!r}: a lowercase RFC 1123 subdomain "
            "(a-z, 0-9, '-', '.'; starting and ending with a letter or digit)"
        )
    return checked


@dataclass(frozen=True, slots=True)
class _PriorityClass:
    value: int
    preemption_policy: str


def _priority(
    c: _Checked, spec: dict[str, Any], classes: dict[str, _PriorityClass], global_default: str
) -> tuple[str, _PriorityClass] | None:
    """The Priority admission's part for a pod or a Kubernetes PodGroup: ``spec.priority``
    from the PriorityClass ``spec.priorityClassName`` names (else the ``globalDefault``
    class, unless a priority is given; else 0), a given priority that contradicts the
    class refused. The class (and its name) when one applies."""
    pc_name = spec.get("priorityClassName")
    if pc_name:
        pc = classes.get(pc_name) if isinstance(pc_name, str) else None
        if pc is None:
            raise c.fail(f"spec.priorityClassName: no PriorityClass named {pc_name!r}")
    elif global_default and "priority" not in spec:
        pc_name = spec["priorityClassName"] = global_default
        pc = classes[global_default]
    else:
        spec.setdefault("priority", 0)
        return None
    _from_class(c, spec, "priority", pc.value, f"PriorityClass {pc_name!r} (value {pc.value})")
    return str(pc_name), pc


def _from_class(c: _Checked, spec: dict[str, Any], key: str, value: object, cls: str) -> None:
    """``spec[key]`` set from the PriorityClass (``cls``: how the refusal names it); a value
    given that differs from it refused, as the Priority admission refuses it."""
    given = spec.get(key)
    if given is not None and given != value:
        raise c.fail(f"spec.{key}: {given!r} contradicts {cls}; leave spec.{key} out")
    spec[key] = value


def _default_pod(c: _Checked, classes: dict[str, _PriorityClass], global_default: str) -> None:
    spec = c.obj.get("spec")
    if not isinstance(spec, dict):
        return  # the Pod validator reports it
    resolved = _priority(c, spec, classes, global_default)
    if resolved is not None:
        pc_name, pc = resolved
        policy = pc.preemption_policy
        _from_class(c, spec, "preemptionPolicy", policy, f"PriorityClass {pc_name!r} ({policy})")
    else:
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    if spec["preemptionPolicy"] not in PREEMPTION_POLICIES:
        raise c.fail(f"spec.preemptionPolicy: must be one of {', '.join(PREEMPTION_POLICIES)}")
    if spec.get("schedulerName") in (None, "", DEFAULT_SCHEDULER_NAME):
        spec["schedulerName"] = KUBESCHED_SCHEDULER_NAME
    status = c.obj.get("status")
    if status is None:
        status = c.obj["status"] = {}
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Running" if spec.get("nodeName") else "Pending"


def _prepare_pod(
    c: _Checked,
    classes: dict[str, _PriorityClass],
    global_default: str,
    node_objects: Mapping[str, dict[str, Any]],
    runtime_classes: Mapping[str, dict[str, Any]],
    limit_ranges: Mapping[str, Sequence[Mapping[str, Any]]],
) -> None:
    """A Pod as the API server would store it: defaulted, its node checked, admitted."""
    _default_pod(c, classes, global_default)
    spec = c.obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise c.fail(f"spec: expected an object, got {type(spec).__name__}")
    node_name = (spec or {}).get("nodeName")
    if node_name and node_name not in node_objects:
        raise c.fail(f"spec.nodeName: no Node named {node_name!r} in the scenario")
    try:
        apiserver.admit_pod(c.obj, node_objects, runtime_classes, limit_ranges)
    except ObjectError as e:
        raise c.fail(str(e)) from None


def _default_upstream_podgroup(
    c: _Checked, classes: dict[str, _PriorityClass], global_default: str
) -> None:
    """kube-apiserver's Priority admission for a ``scheduling.k8s.io`` PodGroup, as for a
    pod (:func:`_priority`): kube-scheduler compares its priority with its pods'."""
    spec = c.obj.get("spec")
    if isinstance(spec, dict):  # else the PodGroup's validation reports it
        _priority(c, spec, classes, global_default)


def _default_node(c: _Checked) -> None:
    status = c.obj.get("status")
    if isinstance(status, dict) and "allocatable" not in status and "capacity" in status:
        cap = status["capacity"]
        status["allocatable"] = dict(cap) if isinstance(cap, dict) else cap
    labels = c.obj["metadata"].setdefault("labels", {})
    if isinstance(labels, dict):
        labels.setdefault("kubernetes.io/hostname", c.name)


def _created_by(doc: Document, obj: dict[str, Any]) -> Document:
    meta = doc.obj["metadata"]
    ref = _ref(doc.obj["kind"], meta.get("namespace") or "default", meta["name"])
    return Document(doc.source, doc.index, obj, doc.item, created_by=ref)


def _controller_error(doc: Document, message: str) -> ScenarioError:
    meta = doc.obj["metadata"]
    ref = _ref(doc.obj["kind"], meta.get("namespace") or "default", meta["name"])
    return ScenarioError(f"{doc.where()} ({ref}): {message}")


def _admission_object(
    c: _Checked,
    runtime_classes: dict[str, dict[str, Any]],
    limit_ranges: dict[str, list[Mapping[str, Any]]],
) -> None:
    """A RuntimeClass or LimitRange: checked (a LimitRange defaulted, as the API server
    stores it) before any pod's admission reads it; a namespace's LimitRanges are read in
    name order."""
    try:
        SUPPORTED_KINDS[c.kind].validate(c.obj)
    except ObjectError as e:
        raise c.fail(str(e)) from None
    if c.kind == "RuntimeClass":
        runtime_classes[c.name] = c.obj
        return
    limit_ranges_admission.default_limit_range(c.obj)
    ranges = limit_ranges.setdefault(c.namespace or "default", [])
    ranges.append(c.obj)
    ranges.sort(key=lambda o: str(o["metadata"]["name"]))


def prepare(documents: Sequence[Document], *, now: datetime | None = None) -> list[dict[str, Any]]:
    """Validate and default every document; return the objects in document order.

    Raises :class:`ScenarioError` for the first problem found; nothing is returned
    (and nothing was applied anywhere) unless every object is valid. Objects are
    defaulted in place.
    """
    documents = list(controllers.expand(documents, _created_by, _controller_error))
    checked: list[_Checked] = []
    seen: dict[tuple[str, str | None, str], Document] = {}
    classes = {
        name: _PriorityClass(value, "PreemptLowerPriority")
        for name, value in BUILTIN_PRIORITY_CLASSES.items()
    }
    global_default = ""
    profiles: dict[str, _Checked] = {}
    runtime_classes: dict[str, dict[str, Any]] = {}
    limit_ranges: dict[str, list[Mapping[str, Any]]] = {}
    for seq, doc in enumerate(documents):
        c = _check_identity(doc, seq)
        # the three PodGroup APIs may each hold a group of the same name
        key = (gangs.store_kind(str(c.obj["apiVersion"]), c.kind), c.namespace, c.name)
        first = seen.get(key)
        if first is not None:
            raise c.fail(
                f"metadata.name: duplicate {_ref(c.kind, c.namespace, c.name)} "
                f"(first defined in {first.where()})"
            )
        seen[key] = doc
        checked.append(c)
        if c.kind == "PriorityClass":
            try:
                validate_priority_class(c.obj)
            except ObjectError as e:
                raise c.fail(str(e)) from None
            classes[c.name] = _PriorityClass(
                c.obj["value"], c.obj.get("preemptionPolicy", "PreemptLowerPriority")
            )
            if c.obj.get("globalDefault"):
                if global_default:
                    raise c.fail(
                        f"globalDefault: PriorityClass {global_default!r} is already "
                        "the global default; only one may be"
                    )
                global_default = c.name
        elif c.kind in ("RuntimeClass", "LimitRange"):
            _admission_object(c, runtime_classes, limit_ranges)
        elif c.kind == "SchedulingProfile":
            spec = c.obj.get("spec")
            name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
            name = name or KUBESCHED_SCHEDULER_NAME
            other = profiles.get(name)
            if other is not None:
                raise c.fail(
                    f"spec.schedulerName: {name!r} is already served by SchedulingProfile "
                    f"{other.name!r} ({other.doc.where()}) (SchedulerNameConflict)"
                )
            profiles[name] = c

    base = (now or datetime.now(UTC)).replace(microsecond=0) - timedelta(seconds=len(checked))
    node_objects = {c.name: c.obj for c in checked if c.kind == "Node"}
    for seq, c in enumerate(checked):
        meta = c.obj["metadata"]
        kind = gangs.store_kind(str(c.obj["apiVersion"]), c.kind)  # same name, other API
        meta.setdefault("uid", controllers.uid_for(kind, c.namespace, c.name))
        meta["creationTimestamp"] = rfc3339(base + timedelta(seconds=seq))
        meta["resourceVersion"] = str(seq + 1)
        if c.kind == "Pod":
            _prepare_pod(c, classes, global_default, node_objects, runtime_classes, limit_ranges)
        elif c.kind == "Node":
            _default_node(c)
        elif kind == gangs.STORE_KINDS[gangs.GangAPI.UPSTREAM]:
            _default_upstream_podgroup(c, classes, global_default)
        if c.kind != "PriorityClass":
            try:
                SUPPORTED_KINDS[c.kind].validate(c.obj)
            except ObjectError as e:
                raise c.fail(str(e)) from None
    objects = [c.obj for c in checked]
    apiserver.default_storage_classes(objects)
    storage_kinds.complete_prebound_claims(objects)
    return objects


def load_scenarios(paths: Sequence[str], *, now: datetime | None = None) -> list[dict[str, Any]]:
    """Read, validate and default scenario files, in order; see the module docstring."""
    documents: list[Document] = []
    for path in paths:
        documents.extend(read_documents(path))
    return prepare(documents, now=now)
