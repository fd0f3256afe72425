"""Hypothesis strategies for malformed and odd Kubernetes objects (issue 9, bad input).

Each strategy starts from a valid object and applies *mutations*: a value put at a field
path (wrong types, nulls, malformed or huge quantities, bad operators, negative weights,
unknown keys). A drawn object carries the mutations it got, so a test can check that a
rejection names one of the fields that were spoiled.
"""

from __future__ import annotations

import copy
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import looptime
from hypothesis import strategies as st

JSON = dict[str, Any]
Path = tuple[str | int, ...]

# Values that are wrong almost everywhere.
ODD_SCALARS: tuple[Any, ...] = (
    None,
    "",
    "1.2.3",
    "-5",
    "1Zi",
    "1e30",
    "1e400",
    "99999999999Ei",
    "0.000000001m",
    "+",
    ".",
    " 1",
    "x" * 300,
    0,
    -1,
    1,
    10**30,
    -(10**30),
    1.5,
    1e300,
    float("inf"),
    True,
    False,
)
ODD_CONTAINERS: tuple[Any, ...] = ([], {}, [1, 2], ["a"], {"x": {}}, [None], [{}], {"": ""})
ODD = ODD_SCALARS + ODD_CONTAINERS

QUANTITIES: tuple[Any, ...] = (
    "1.2.3",
    "-5",
    "",
    "1Zi",
    "1e30",
    "99999999999Ei",
    "9223372036854775807",
    "9223372036854775808",
    "1e-30",
    "0",
    "-0.5m",
    10**30,
    2**63,
    -3,
    0.1,
    1e300,
    True,
    None,
    [],
    {},
)
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus", "", None, 3, "in")
VALUES: tuple[Any, ...] = (None, [], ["a"], ["1"], ["x", "y"], "notalist", [1], [None], {"a": 1})
KEYS: tuple[Any, ...] = ("bad", "zone", "", "kubernetes.io/hostname", None, 7, "a" * 400, "-x")
TOPOLOGY_KEYS: tuple[Any, ...] = ("", "zone", "kubernetes.io/hostname", None, 5, "nosuchkey")
WEIGHTS: tuple[Any, ...] = (-1, 0, 1, 100, 101, 10**12, -(10**12), "5", None, 1.5, True)


@dataclass
class Spoiled:
    """A drawn object and the mutations it got (path, value)."""

    obj: JSON
    mutations: list[tuple[Path, Any]] = field(default_factory=list)

    def field_names(self) -> set[str]:
        """Every key on the spoiled paths (what a specific rejection would name)."""
        return {p for path, _ in self.mutations for p in path if isinstance(p, str)}


def put(obj: Any, path: Path, value: Any) -> None:
    """Set ``value`` at ``path``, creating maps (and growing lists) on the way; a path
    through a non-container is overwritten into one."""
    cur = obj
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        want: Any = [] if isinstance(nxt, int) else {}
        if isinstance(part, int):
            while len(cur) <= part:
                cur.append(copy.deepcopy(want))
            if not isinstance(cur[part], type(want)):
                cur[part] = copy.deepcopy(want)
        elif not isinstance(cur.get(part), type(want)):
            cur[part] = copy.deepcopy(want)
        cur = cur[part]
    last = path[-1]
    if isinstance(last, int):
        while len(cur) <= last:
            cur.append(None)
    cur[last] = value


# -- structured nasty pieces ------------------------------------------------------------------
@st.composite
def requirements(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    for _ in range(draw(st.integers(0, 3))):
        r: JSON = {"key": draw(st.sampled_from(KEYS)), "operator": draw(st.sampled_from(OPERATORS))}
        if draw(st.booleans()):
            r["values"] = draw(st.sampled_from(VALUES))
        out.append(r)
    return out


@st.composite
def label_selectors(draw: st.DrawFn) -> Any:
    return draw(
        st.one_of(
            st.sampled_from(ODD),
            st.fixed_dictionaries(
                {},
                optional={
                    "matchLabels": st.one_of(
                        st.sampled_from(ODD),
                        st.dictionaries(st.sampled_from(("bad", "peer", "")), st.sampled_from(ODD)),
                        st.just({"peer": "a"}),
                        st.just({"peer": "b"}),
                    ),
                    "matchExpressions": st.one_of(requirements(), st.sampled_from(ODD)),
                },
            ),
        )
    )


@st.composite
def pod_affinity_terms(draw: st.DrawFn) -> Any:
    term: JSON = {"labelSelector": draw(label_selectors())}
    term["topologyKey"] = draw(st.sampled_from(TOPOLOGY_KEYS))
    if draw(st.booleans()):
        term["namespaces"] = draw(st.sampled_from((["default"], [], "default", [None], None)))
    if draw(st.booleans()):
        term["namespaceSelector"] = draw(label_selectors())
    if draw(st.booleans()):
        term["matchLabelKeys"] = draw(st.sampled_from((["peer"], ["bad"], "peer", [3], None)))
    if draw(st.booleans()):
        term["mismatchLabelKeys"] = draw(st.sampled_from((["peer"], [""], {"a": 1})))
    if draw(st.booleans()):
        return {"weight": draw(st.sampled_from(WEIGHTS)), "podAffinityTerm": term}
    return term


@st.composite
def affinities(draw: st.DrawFn) -> Any:
    """Node/pod (anti-)affinity with odd selectors, weights and topology keys; pods label
    each other ``peer: a`` / ``peer: b`` so that terms can form cycles."""
    node_term = st.fixed_dictionaries(
        {},
        optional={
            "matchExpressions": st.one_of(requirements(), st.sampled_from(ODD)),
            "matchFields": st.one_of(requirements(), st.sampled_from(ODD)),
        },
    )
    node = st.fixed_dictionaries(
        {},
        optional={
            "requiredDuringSchedulingIgnoredDuringExecution": st.one_of(
                st.sampled_from(ODD),
                st.fixed_dictionaries(
                    {
                        "nodeSelectorTerms": st.one_of(
                            st.lists(node_term, max_size=2), st.sampled_from(ODD)
                        )
                    }
                ),
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": st.one_of(
                st.sampled_from(ODD),
                st.lists(
                    st.fixed_dictionaries(
                        {"weight": st.sampled_from(WEIGHTS), "preference": node_term}
                    ),
                    max_size=2,
                ),
            ),
        },
    )
    pod = st.fixed_dictionaries(
        {},
        optional={
            "requiredDuringSchedulingIgnoredDuringExecution": st.one_of(
                st.lists(pod_affinity_terms(), max_size=2), st.sampled_from(ODD)
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": st.one_of(
                st.lists(pod_affinity_terms(), max_size=2), st.sampled_from(ODD)
            ),
        },
    )
    return draw(
        st.one_of(
            st.sampled_from(ODD),
            st.fixed_dictionaries(
                {},
                optional={
                    "nodeAffinity": st.one_of(node, st.sampled_from(ODD)),
                    "podAffinity": st.one_of(pod, st.sampled_from(ODD)),
                    "podAntiAffinity": st.one_of(pod, st.sampled_from(ODD)),
                },
            ),
        )
    )


@st.composite
def spread_constraints(draw: st.DrawFn) -> Any:
    c = st.fixed_dictionaries(
        {
            "maxSkew": st.sampled_from(WEIGHTS),
            "topologyKey": st.sampled_from(TOPOLOGY_KEYS),
            "whenUnsatisfiable": st.sampled_from(
                ("DoNotSchedule", "ScheduleAnyway", "Bogus", None, 1)
            ),
        },
        optional={
            "labelSelector": label_selectors(),
            "minDomains": st.sampled_from((0, -1, 1, 5, 10**12, None, "2")),
            "nodeAffinityPolicy": st.sampled_from(("Honor", "Ignore", "Bogus", None)),
            "nodeTaintsPolicy": st.sampled_from(("Honor", "Ignore", "", 0)),
            "matchLabelKeys": st.sampled_from((["peer"], "peer", [None], [])),
        },
    )
    return draw(st.one_of(st.lists(c, max_size=2), st.sampled_from(ODD)))


@st.composite
def tolerations(draw: st.DrawFn) -> Any:
    t = st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(KEYS),
            "operator": st.sampled_from(OPERATORS),
            "value": st.sampled_from(("", "x", None, 1, [])),
            "effect": st.sampled_from(("NoSchedule", "NoExecute", "Bogus", "", None, 2)),
            "tolerationSeconds": st.sampled_from((-1, 0, 10**30, "5", None)),
        },
    )
    return draw(st.one_of(st.lists(t, max_size=3), st.sampled_from(ODD), st.just([{}] * 500)))


# -- pods and nodes ---------------------------------------------------------------------------
C0: Path = ("spec", "containers", 0)
# Not ("metadata",) itself: the in-memory store needs a map there, as the API server does
# (test_bad_input's direct handler test covers it).
POD_PATHS: tuple[Path, ...] = (
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "labels", "bad"),
    ("metadata", "annotations"),
    ("metadata", "deletionTimestamp"),
    ("spec",),
    ("spec", "containers"),
    C0,
    (*C0, "resources"),
    (*C0, "resources", "requests"),
    (*C0, "resources", "limits"),
    (*C0, "ports"),
    (*C0, "ports", 0),
    (*C0, "ports", 0, "hostPort"),
    (*C0, "ports", 0, "protocol"),
    (*C0, "image"),
    ("spec", "initContainers"),
    ("spec", "initContainers", 0),
    ("spec", "initContainers", 0, "resources", "requests"),
    ("spec", "initContainers", 0, "restartPolicy"),
    ("spec", "overhead"),
    ("spec", "priority"),
    ("spec", "preemptionPolicy"),
    ("spec", "nodeSelector"),
    ("spec", "affinity"),
    ("spec", "tolerations"),
    ("spec", "topologySpreadConstraints"),
    ("spec", "schedulingGates"),
    ("spec", "volumes"),
    ("spec", "volumes", 0),
    ("spec", "volumes", 0, "persistentVolumeClaim"),
    ("spec", "volumes", 0, "persistentVolumeClaim", "claimName"),
    ("status",),
    ("status", "phase"),
    ("status", "nominatedNodeName"),
)
# Not ("status", "conditions"): the in-memory cluster's status patch reads them as the
# API server stores them (a list of objects); the scheduler itself never reads them.
RESOURCES = ("cpu", "memory", "ephemeral-storage", "example.com/gpu", "pods", "hugepages-2Mi")
QUANTITY_PATHS: tuple[Path, ...] = (
    *(
        (*base, section, res)
        for base in (C0, ("spec", "initContainers", 0))
        for section in ("requests", "limits")
        for res in RESOURCES
    ),
    ("spec", "overhead", "cpu"),
    ("spec", "overhead", "memory"),
)


def base_pod(name: str, scheduler: str = "kubesched") -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": {"bad": "x"},
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def _mutation(paths: tuple[Path, ...], special: dict[Path, st.SearchStrategy[Any]]) -> Any:
    plain = st.tuples(st.sampled_from(paths), st.sampled_from(ODD))
    structured = [st.tuples(st.just(p), s) for p, s in special.items()]
    unknown = st.tuples(
        st.sampled_from(paths).map(lambda p: (*p, "unknownKey")), st.sampled_from(ODD)
    )
    return st.one_of(plain, unknown, *structured)


POD_SPECIAL: dict[Path, st.SearchStrategy[Any]] = {
    ("spec", "affinity"): affinities(),
    ("spec", "topologySpreadConstraints"): spread_constraints(),
    ("spec", "tolerations"): tolerations(),
    ("metadata", "labels", "peer"): st.sampled_from(("a", "b")),
    ("spec", "priority"): st.sampled_from((2**31, -(2**31), 10**30, -1, "5", 1.0, True)),
    (*C0, "ports"): st.just(
        [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 80, "hostPort": 8080}]
    ),
    ("spec", "schedulingGates"): st.sampled_from(([{"name": ""}], [{}], ["gate"], [{"name": 1}])),
}
for _p in QUANTITY_PATHS:
    POD_SPECIAL[_p] = st.sampled_from(QUANTITIES)


@st.composite
def bad_pods(draw: st.DrawFn, name: str) -> Spoiled:
    pod = base_pod(name)
    out = Spoiled(pod)
    for path, value in draw(st.lists(_mutation(POD_PATHS, POD_SPECIAL), min_size=1, max_size=3)):
        put(pod, path, copy.deepcopy(value))
        out.mutations.append((path, value))
    return out


NODE_PATHS: tuple[Path, ...] = (
    ("metadata", "name"),
    ("metadata", "uid"),
    ("metadata", "labels"),
    ("metadata", "labels", "zone"),
    ("metadata", "annotations"),
    ("spec",),
    ("spec", "unschedulable"),
    ("spec", "taints"),
    ("spec", "taints", 0),
    ("spec", "taints", 0, "key"),
    ("spec", "taints", 0, "effect"),
    ("status",),
    ("status", "allocatable"),
    ("status", "capacity"),
    ("status", "images"),
    ("status", "images", 0),
    ("status", "images", 0, "names"),
    ("status", "images", 0, "sizeBytes"),
    ("status", "conditions"),
)
NODE_SPECIAL: dict[Path, st.SearchStrategy[Any]] = {
    ("status", "allocatable", res): st.sampled_from(QUANTITIES)
    for res in ("cpu", "memory", "pods", "ephemeral-storage", "example.com/gpu")
}
NODE_SPECIAL[("spec", "taints")] = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(KEYS),
            "value": st.sampled_from(("", "x", None, 3)),
            "effect": st.sampled_from(("NoSchedule", "Bogus", "", None)),
        },
    ),
    max_size=3,
)


def base_node(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"zone": "z-bad"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    }


@st.composite
def bad_nodes(draw: st.DrawFn, name: str) -> Spoiled:
    node = base_node(name)
    out = Spoiled(node)
    for path, value in draw(st.lists(_mutation(NODE_PATHS, NODE_SPECIAL), min_size=1, max_size=3)):
        put(node, path, copy.deepcopy(value))
        out.mutations.append((path, value))
    return out


def in_fresh_loop(coro: Coroutine[Any, Any, None]) -> None:
    """Run one hypothesis example in its own virtual-time loop: nothing an example leaves
    scheduled (Permit timers, event writes) runs into the next one. (With one loop for
    every example of a test, a PodGroup run once left the next example's queue spinning
    in place with the virtual clock stopped.)"""
    loop = looptime.new_event_loop(start=0)
    try:
        loop.run_until_complete(coro)
    finally:
        loop.close()
