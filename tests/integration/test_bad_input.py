"""Bad input, pods and nodes (issue 9, item 4): malformed and odd objects, drawn by
hypothesis, interleaved with valid pods, fed through the real event handlers to a
running scheduler on the in-memory cluster (virtual time).

Properties: no exception escapes the handlers and the scheduling loop keeps running; a
rejected object is reported with a message naming a spoiled field; an accepted odd pod
is bound, gated, or has a FailedScheduling event that names no Python exception (a
plugin tripping over a field is a bug, not a reason); every valid pod is bound exactly
once; the cache ends equal to the cluster's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod
from tests.integration.bad_input import JSON, Spoiled, bad_nodes, bad_pods, base_pod, in_fresh_loop
from tests.integration.harness import Harness

pytestmark = pytest.mark.looptime

EXAMPLES = int(os.environ.get("KUBESCHED_BAD_INPUT_EXAMPLES", "40"))
"""Examples per property (CI keeps it modest; raise it for a longer hunt)."""
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# What a message shows when a plugin or parser tripped over a field instead of naming it.
PYTHON_ERRORS = (
    "Error(",
    "TypeError",
    "AttributeError",
    "KeyError",
    "IndexError",
    "has no attribute",
    "unhashable",
    "not subscriptable",
    "not iterable",
    "object is not",
    "NoneType",
    "Traceback",
)


def valid_nodes() -> list[JSON]:
    return [
        make_node(f"n{i}").alloc(cpu="4", memory="16Gi", pods="110").label("zone", f"z{i}").obj()
        for i in range(3)
    ]


def valid_pod(i: int) -> JSON:
    return make_pod(f"ok-{i}").req(cpu="100m", memory="64Mi").label("app", "ok").obj()


def looks_like_a_crash(msg: str) -> bool:
    return any(s in msg for s in PYTHON_ERRORS)


async def feed(h: Harness, items: list[tuple[str, Any]]) -> dict[str, tuple[Spoiled, str | None]]:
    """Apply each item (``("valid", obj)`` or ``("bad", Spoiled)``) a moment apart; for each
    bad one, the message it was rejected with (None: accepted)."""
    out: dict[str, tuple[Spoiled, str | None]] = {}
    for i, (what, item) in enumerate(items):
        if what == "valid":
            h.apply(item)
        else:
            before = len(h.bad)
            h.apply(item.obj)
            assert len(h.bad) <= before + 1
            out[f"bad#{i}"] = (item, h.bad[-1] if len(h.bad) > before else None)
        await asyncio.sleep(0.05)
    return out


def accepted_pods(h: Harness, fed: dict[str, tuple[Spoiled, str | None]]) -> list[Pod]:
    return [
        Pod(s.obj)
        for s, msg in fed.values()
        if msg is None and s.obj.get("kind") == "Pod" and not Pod(s.obj).is_terminal()
    ]


def settled(h: Harness, pod: Pod) -> bool:
    """Bound, or not ours to schedule, or reported (an event or a gate holds it)."""
    cur = h.cluster.pod(pod.key)
    if cur is None or (cur.get("spec") or {}).get("nodeName"):
        return True
    if pod.scheduler_name != "kubesched" or pod.deletion_timestamp or pod.scheduling_gates:
        return True
    return bool(h.cluster.events_for(pod.key))


def check_cache_matches_cluster(h: Harness, rejected: set[str]) -> None:
    want: dict[str, list[str]] = {}
    for key, obj in h.cluster.objects.get("Pod", {}).items():
        spec = obj.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if node and key not in rejected and not Pod(obj).is_terminal():
            want.setdefault(str(node), []).append(key)
    got = {n: keys for n, keys in h.sched.cache.dump().items() if keys}
    assert got == {n: sorted(keys) for n, keys in want.items()}


async def run_case(bad: list[Spoiled], order: list[int]) -> None:
    h = Harness()
    h.apply(*valid_nodes())
    valid = [valid_pod(i) for i in range(4)]
    items: list[tuple[str, Any]] = [("valid", p) for p in valid] + [("bad", s) for s in bad]
    items = [items[i] for i in order]
    task = asyncio.create_task(h.sched.run())
    try:
        fed = await feed(h, items)
        valid_keys = [f"default/{p['metadata']['name']}" for p in valid]
        await h.wait_for(lambda: all(h.node_of(k) for k in valid_keys), within=120)
        odd = accepted_pods(h, fed)
        await h.wait_for(lambda: all(settled(h, p) for p in odd), within=120)
        await asyncio.sleep(1)
        assert not task.done(), task.exception() if task.done() else None

        spoiled_by_name: dict[str, Spoiled] = {}
        for spoiled, msg in fed.values():
            meta = spoiled.obj.get("metadata") or {}
            if isinstance(meta.get("name"), str):
                spoiled_by_name[meta["name"]] = spoiled
            if msg is None:
                continue
            names = spoiled.field_names()
            assert any(n in msg for n in names), (msg, spoiled.mutations)
            assert not looks_like_a_crash(msg), msg
        for e in h.cluster.events:
            # A plugin that trips over a field says which one (and Python's words for it).
            if looks_like_a_crash(e.message):
                names = (
                    spoiled_by_name[e.name].field_names() if e.name in spoiled_by_name else set()
                )
                assert any(f".{n}" in e.message for n in names), (e.name, e.message)

        binds = Counter(key for key, _ in h.cluster.bindings)
        assert all(n == 1 for n in binds.values()), binds
        rejected = {
            f"{(s.obj.get('metadata') or {}).get('namespace') or 'default'}/"
            f"{(s.obj.get('metadata') or {}).get('name')}"
            for s, msg in fed.values()
            if msg is not None and s.obj.get("kind") == "Pod"
        }
        check_cache_matches_cluster(h, rejected)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await h.sched.abort()


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Spoiled], list[int]]:
    n = draw(st.integers(1, 4))
    bad = [
        draw(bad_pods(f"bad-{i}") if draw(st.integers(0, 2)) else bad_nodes(f"bad-node-{i}"))
        for i in range(n)
    ]
    # Two objects of one name are one object replaced: the in-memory store would swap the
    # uid under one key, which the API server never does (delete and create instead).
    keys = [MemoryCluster.key_of(s.obj) for s in bad]
    assume(len(set(keys)) == len(keys))
    order = draw(st.permutations(range(4 + n)))
    return bad, list(order)


@SETTINGS
@given(case=cases())
def test_odd_pods_and_nodes_never_stop_the_loop(
    case: tuple[list[Spoiled], list[int]],
) -> None:
    in_fresh_loop(run_case(*case))


# -- regressions and the named cases of the issue -------------------------------------------------
def spoiled_pod(name: str, *mutations: tuple[tuple[str | int, ...], Any]) -> Spoiled:
    from tests.integration.bad_input import put

    s = Spoiled(base_pod(name))
    for path, value in mutations:
        put(s.obj, path, value)
        s.mutations.append((path, value))
    return s


REQ = ("spec", "containers", 0, "resources", "requests")

NAMED = {
    "huge quantity": spoiled_pod("huge", ((*REQ, "cpu"), "1e30")),
    "huge binary quantity": spoiled_pod("huge-ei", ((*REQ, "memory"), "99999999999Ei")),
    "malformed quantity": spoiled_pod("dots", ((*REQ, "cpu"), "1.2.3")),
    "negative quantity": spoiled_pod("neg", ((*REQ, "cpu"), "-5")),
    "unknown suffix": spoiled_pod("zi", ((*REQ, "memory"), "1Zi")),
    "bool quantity": spoiled_pod("bool", ((*REQ, "cpu"), True)),
    "list for a map": spoiled_pod("list", (("spec", "nodeSelector"), ["a"])),
    "null spec": spoiled_pod("nullspec", (("spec",), None)),
    # hypothesis found it: the simulator's claim controller read spec.resourceClaims of
    # any spec and stopped the apply with an AttributeError
    "text spec": spoiled_pod("textspec", (("spec",), "0")),
    "text status": spoiled_pod("textstatus", (("status",), "0")),
    "text resourceClaims": spoiled_pod("textclaims", (("spec", "resourceClaims"), "0")),
    "missing name": spoiled_pod("x", (("metadata", "name"), None)),
    "bad toleration operator": spoiled_pod(
        "tol", (("spec", "tolerations"), [{"key": "k", "operator": "Bogus"}])
    ),
    "In without values": spoiled_pod(
        "in",
        (
            ("spec", "affinity"),
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "z", "operator": "In"}]}
                        ]
                    }
                }
            },
        ),
    ),
    "Exists with values": spoiled_pod(
        "exists",
        (
            ("spec", "affinity"),
            {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {
                                "matchExpressions": [
                                    {"key": "peer", "operator": "Exists", "values": ["a"]}
                                ]
                            },
                            "topologyKey": "zone",
                        }
                    ]
                }
            },
        ),
    ),
    "negative weight": spoiled_pod(
        "weight",
        (
            ("spec", "affinity"),
            {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": -10,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"peer": "a"}},
                                "topologyKey": "zone",
                            },
                        }
                    ]
                }
            },
        ),
    ),
    "zero maxSkew, empty topology key": spoiled_pod(
        "skew",
        (
            ("spec", "topologySpreadConstraints"),
            [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}],
        ),
    ),
    "duplicate host ports": spoiled_pod(
        "ports",
        (
            ("spec", "containers", 0, "ports"),
            [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 80, "hostPort": 8080}],
        ),
    ),
    # found by hypothesis: AttributeError: 'NoneType' object has no attribute 'get' (parsing)
    "null init container (found)": spoiled_pod("found-init", (("spec", "initContainers"), [None])),
    # TypeError: 'int' object is not iterable (in PodTopologySpread, every cycle)
    "number for matchExpressions (found)": spoiled_pod(
        "found-exprs",
        (
            ("spec", "topologySpreadConstraints"),
            [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchExpressions": -1},
                }
            ],
        ),
    ),
}


def affinity_cycle() -> list[Spoiled]:
    """a requires b's zone, b requires a's zone: neither can go first."""

    def one(me: str, peer: str) -> Spoiled:
        aff = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"peer": peer}}, "topologyKey": "zone"}
                ]
            }
        }
        return spoiled_pod(
            f"cycle-{me}", (("metadata", "labels", "peer"), me), (("spec", "affinity"), aff)
        )

    return [one("a", "b"), one("b", "a")]


@pytest.mark.parametrize("name", list(NAMED))
async def test_named_bad_pods(name: str) -> None:
    await run_case([NAMED[name]], [4, 0, 1, 2, 3])


async def test_an_affinity_cycle_stays_pending_with_a_reason() -> None:
    await run_case(affinity_cycle(), [0, 4, 1, 5, 2, 3])


# -- what hypothesis found (each crashed the watch handler or the loop before its fix) ------------
def node_with(*mutations: tuple[tuple[str | int, ...], Any]) -> JSON:
    from tests.integration.bad_input import base_node, put

    node = base_node("found")
    for path, value in mutations:
        put(node, path, value)
    return node


FOUND: dict[str, tuple[JSON, str]] = {
    # TypeError: unhashable type: 'list' (the quantity cache looked the list up)
    "list quantity": (node_with((("status", "allocatable", "cpu"), [])), "status.allocatable.cpu"),
    "list image size": (
        node_with((("status", "images", 0, "sizeBytes"), [1, 2])),
        "status.images[0].sizeBytes",
    ),
    # TypeError: 'int' object is not iterable
    "number for tolerations": (
        spoiled_pod("found", (("spec", "tolerations"), -1)).obj,
        "spec.tolerations",
    ),
    # AttributeError: 'str' object has no attribute 'get' (in the volume plugins, every cycle)
    "string for volumes": (
        spoiled_pod("found", (("spec", "volumes"), "1.2.3")).obj,
        "spec.volumes",
    ),
    "string volume source": (
        spoiled_pod(
            "found", (("spec", "volumes"), [{"name": "v", "persistentVolumeClaim": "x"}])
        ).obj,
        "spec.volumes[0].persistentVolumeClaim",
    ),
    "string for podAntiAffinity": (
        spoiled_pod("found", (("spec", "affinity"), {"podAntiAffinity": "1.2.3"})).obj,
        "spec.affinity.podAntiAffinity",
    ),
    "map for resources": (
        spoiled_pod("found", (("spec", "containers", 0, "resources"), [])).obj,
        "spec.containers[0].resources",
    ),
    # a negative request made the node look larger than it is
    "negative request": (
        spoiled_pod("found", (("spec", "containers", 0, "resources", "requests", "cpu"), "-5")).obj,
        "spec.containers[0].resources.requests.cpu",
    ),
    "infinite quantity": (
        spoiled_pod("found", (("spec", "overhead", "memory"), float("inf"))).obj,
        "spec.overhead.memory",
    ),
}


@pytest.mark.parametrize("name", list(FOUND))
def test_found_by_hypothesis_is_reported_with_its_field(name: str) -> None:
    obj, field_path = FOUND[name]
    h = Harness()
    h.apply(obj)
    assert len(h.bad) == 1 and field_path in h.bad[0], h.bad


def test_null_list_items_read_as_empty_objects() -> None:
    """``taints: [null]`` decodes to one empty taint in the API server: its key is missing."""
    h = Harness()
    h.apply(node_with((("spec", "taints"), [None])))
    assert h.bad == ["Node found: spec.taints[0].key: required"]


async def test_a_second_pod_with_a_known_uid_is_refused() -> None:
    """Two pods sharing a uid made the loop raise CacheError ('already in the cache') and
    stop: the second one is reported, the first one is scheduled."""
    h = Harness()
    h.apply(*valid_nodes())
    a = valid_pod(1)
    b = valid_pod(2)
    b["metadata"]["uid"] = a["metadata"]["uid"]
    task = asyncio.create_task(h.sched.run())
    try:
        h.apply(a, b)
        assert len(h.bad) == 1 and "metadata.uid" in h.bad[0] and "default/ok-1" in h.bad[0]
        await h.wait_for(lambda: bool(h.node_of("default/ok-1")))
        await asyncio.sleep(5)
        assert not task.done()
        assert h.node_of("default/ok-2") is None
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await h.sched.abort()


# -- anything at all, straight into the handlers ---------------------------------------------------
JSON_VALUES = st.recursive(
    st.sampled_from((None, True, 0, -1, 10**30, 1.5, "", "x", "1Gi")),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(("metadata", "spec", "status", "name", "containers", "taints", "x")),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)


@SETTINGS
@given(
    kind=st.sampled_from(("Pod", "Node")),
    event=st.sampled_from(("ADDED", "MODIFIED", "DELETED")),
    obj=JSON_VALUES,
)
async def test_any_json_through_the_handlers_is_reported_or_taken(
    kind: str, event: str, obj: Any
) -> None:
    """Whatever a watch could hand over (metadata not a map included): the handler either
    takes it or reports it naming a field; nothing is raised."""
    h = Harness()
    if not isinstance(obj, dict):
        obj = {"metadata": {"name": "n"}, "spec": obj}
    h.handlers.on_event(kind, event, obj)
    for msg in h.bad:
        assert ": " in msg and not looks_like_a_crash(msg), msg
