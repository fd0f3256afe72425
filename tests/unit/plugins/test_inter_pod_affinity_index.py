"""InterPodAffinity's counts kept across cycles (plugins/inter_pod_affinity/index.py):
the plugin's Filter and Score answers equal a per-node, per-pod reference of
kube-scheduler's rules on random clusters (namespaces, namespaceSelector,
matchLabelKeys/mismatchLabelKeys, nodes without the topology key), and the counts a
cache's pods assumed, confirmed, relabelled, forgotten and removed leave behind equal a
recount from the nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.backend.cache import Cache
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import PodJournal
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Node, Pod
from kubesched.plugins import inter_pod_affinity as ipa
from kubesched.plugins.inter_pod_affinity.index import AffinityIndex
from kubesched.plugins.inter_pod_affinity.terms import AffinityTerm, TermCache
from tests.builders import make_node, make_pod
from tests.unit.plugins.test_inter_pod_affinity import (
    AFF,
    ANTI,
    EXIST,
    HOST,
    ZONE,
    NamespaceStore,
    affinity,
    plugin,
    term,
)

RACK = "rack"
NAMESPACES = {"default": {}, "other": {}, "team": {"team": "x"}}
STORE = NamespaceStore(NAMESPACES)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- random objects -------------------------------------------------------------------------
@st.composite
def rand_term(draw: st.DrawFn) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    ns = draw(st.sampled_from(("own", "list", "all", "selector")))
    if ns == "list":
        extra["namespaces"] = draw(st.lists(st.sampled_from(sorted(NAMESPACES)), max_size=2))
    elif ns == "all":
        extra["namespaceSelector"] = {}
    elif ns == "selector":
        extra["namespaceSelector"] = {"matchLabels": {"team": "x"}}
    keys = draw(st.sampled_from(((), ("matchLabelKeys",), ("mismatchLabelKeys",))))
    for k in keys:
        extra[k] = ["ver"]
    key = draw(st.sampled_from((ZONE, HOST, RACK)))
    return term({"app": draw(st.sampled_from(("a", "b")))}, key=key, **extra)


@st.composite
def rand_pod(draw: st.DrawFn, name: str = "p", uid: str | None = None) -> Pod:
    b = make_pod(name, draw(st.sampled_from(sorted(NAMESPACES))))
    b.labels(app=draw(st.sampled_from(("a", "b", "c"))), ver=draw(st.sampled_from(("1", "2"))))
    if uid is not None:
        b.uid(uid)
    kinds = draw(st.lists(st.sampled_from(("req", "anti", "pref", "pref_anti")), max_size=3))
    weight = st.integers(1, 100)
    a = affinity(
        req=[draw(rand_term()) for k in kinds if k == "req"],
        anti=[draw(rand_term()) for k in kinds if k == "anti"],
        pref=[(draw(weight), draw(rand_term())) for k in kinds if k == "pref"],
        pref_anti=[(draw(weight), draw(rand_term())) for k in kinds if k == "pref_anti"],
    )
    if a:
        b.affinity(a)
    return b.pod()


@st.composite
def rand_node(draw: st.DrawFn, name: str) -> Node:
    b = make_node(name)
    for key, values in ((ZONE, ("z1", "z2")), (RACK, ("r1", "r2", "r3"))):
        v = draw(st.sampled_from((*values, None)))
        if v is not None:
            b.label(key, v)
    return b.node()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, Pod]:
    infos = []
    for i in range(draw(st.integers(1, 7))):
        node = draw(rand_node(f"n{i}"))
        pods = [
            draw(rand_pod(f"e{i}-{j}")).assigned_to(node.name)
            for j in range(draw(st.integers(0, 3)))
        ]
        b = make_node(node.name)
        for k, v in node.labels.items():
            b.label(k, v)
        infos.append(b.info(*pods))
    return Snapshot(infos), draw(rand_pod("incoming"))


# -- the reference: kube-scheduler's rules, node by node and pod by pod ---------------------
def ns_labels(namespace: str) -> Mapping[str, str]:
    return NAMESPACES.get(namespace, {})


def selects(t: AffinityTerm, owner_ns_labels: Mapping[str, str] | None, p: Pod) -> bool:
    """An incoming pod's term (namespaceSelector read against ``p``'s namespace)."""
    return t.matches(p, ns_labels(p.namespace) if owner_ns_labels is None else owner_ns_labels)


def reference_filter(snap: Snapshot, pod: Pod) -> dict[str, Status | None]:
    tc = TermCache()
    own = tc.get(pod)
    aff, anti = own.required_affinity, own.required_anti
    existing: Counter[tuple[str, str]] = Counter()
    aff_counts: Counter[tuple[str, str]] = Counter()
    anti_counts: Counter[tuple[str, str]] = Counter()
    for ni in snap.node_infos:
        assert ni.node is not None
        labels = ni.node.labels
        for p in ni.pods:
            for t in tc.lenient(p).required_anti:
                if t.matches(pod, ns_labels(pod.namespace)) and t.topology_key in labels:
                    existing[(t.topology_key, labels[t.topology_key])] += 1
            if aff and all(selects(t, None, p) for t in aff):
                for t in aff:
                    if t.topology_key in labels:
                        aff_counts[(t.topology_key, labels[t.topology_key])] += 1
            for t in anti:
                if selects(t, None, p) and t.topology_key in labels:
                    anti_counts[(t.topology_key, labels[t.topology_key])] += 1
    self_match = bool(aff) and all(selects(t, None, pod) for t in aff)

    def one(labels: Mapping[str, str]) -> Status | None:
        if aff:
            if any(t.topology_key not in labels for t in aff):
                return AFF
            exist = all(aff_counts[(t.topology_key, labels[t.topology_key])] > 0 for t in aff)
            if not exist and not (not aff_counts and self_match):
                return AFF
        for t in anti:
            v = labels.get(t.topology_key)
            if v is not None and anti_counts[(t.topology_key, v)] > 0:
                return ANTI
        if any(existing[item] > 0 for item in labels.items()):
            return EXIST
        return None

    return {ni.name: one(ni.node.labels) for ni in snap.node_infos if ni.node is not None}


def reference_raw_scores(snap: Snapshot, pod: Pod, hard_weight: int) -> list[int]:
    tc = TermCache()
    own = tc.get(pod)
    has_pref = bool(own.preferred_affinity or own.preferred_anti)
    topo: Counter[tuple[str, str]] = Counter()
    for ni in snap.node_infos:
        assert ni.node is not None
        labels = ni.node.labels
        for p in ni.pods if has_pref else ni.pods_with_affinity:
            pt = tc.lenient(p)
            found: list[tuple[AffinityTerm, int]] = [
                *((w.term, w.weight) for w in own.preferred_affinity if selects(w.term, None, p)),
                *((w.term, -w.weight) for w in own.preferred_anti if selects(w.term, None, p)),
            ]
            mine = ns_labels(pod.namespace)
            found += [(t, hard_weight) for t in pt.required_affinity if t.matches(pod, mine)]
            found += [
                (w.term, w.weight) for w in pt.preferred_affinity if w.term.matches(pod, mine)
            ]
            found += [(w.term, -w.weight) for w in pt.preferred_anti if w.term.matches(pod, mine)]
            for t, weight in found:
                if t.topology_key in labels:
                    topo[(t.topology_key, labels[t.topology_key])] += weight
    return [
        sum(topo[item] for item in ni.node.labels.items())
        for ni in snap.node_infos
        if ni.node is not None
    ]


def check_against_reference(snap: Snapshot, pl: ipa.InterPodAffinity, pod: Pod) -> None:
    """Filter (vector and per node) and raw and normalized scores equal the reference."""
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    want = reference_filter(snap, pod)
    if s is not None and s.code == Code.SKIP:
        assert all(v is None for v in want.values()), want
    else:
        assert s is None
        got = {ni.name: pl.filter(state, pod, ni) for ni in snap.node_infos}
        assert got == want
        mask = pl.filter_mask(state, pod, snap)
        assert mask is not None and mask.tolist() == [v is None for v in want.values()]
    state = CycleState()
    ref = reference_raw_scores(snap, pod, pl.args.hard_pod_affinity_weight)
    s = pl.pre_score(state, pod, snap.node_infos)
    if s is not None:
        assert s.code == Code.SKIP
        assert len(set(ref)) <= 1, ref  # every node normalizes to 0 either way
        return
    rows = np.arange(len(snap), dtype=np.intp)
    vec = pl.score_vector(state, pod, snap, rows)
    assert vec is not None and vec.tolist() == ref
    assert [pl.score(state, pod, ni)[0] for ni in snap.node_infos] == ref


@SETTINGS
@given(clusters(), st.sampled_from((0, 1, 7)))
def test_vector_answers_equal_the_per_node_reference(
    case: tuple[Snapshot, Pod], hard_weight: int
) -> None:
    snap, pod = case
    pl = plugin(snap, STORE, hardPodAffinityWeight=hard_weight)
    check_against_reference(snap, pl, pod)


# -- incremental counts == a recount --------------------------------------------------------
def summary(idx: AffinityIndex, keys: tuple[str, ...]) -> dict[str, Any]:
    """What the counts say, in a form two indexes can be compared by."""
    for k in keys:
        idx.track(k)
    classes = {
        (c.namespace, tuple(sorted(c.labels.items()))): (
            c.size,
            {k: dict(d) for k, d in c.domains.items() if k in keys and d},
        )
        for c in idx.classes.values()
    }
    terms: dict[Hashable, Any] = {
        key: (dict(td.req_anti), dict(td.req_aff), dict(td.pref)) for key, td in idx.terms.items()
    }
    return {"classes": classes, "terms": terms}


OPS = (
    "assume",
    "assume",
    "confirm",
    "forget",
    "remove",
    "relabel_pod",
    "node",
    "drop_node",
    "cycle",
)


@st.composite
def cache_histories(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 40))):
        op = draw(st.sampled_from(OPS))
        if op in ("assume", "confirm"):
            ops.append((op, draw(st.integers(0, 7)), draw(st.integers(0, 3)), draw(rand_pod())))
        elif op in ("forget", "remove"):
            ops.append((op, draw(st.integers(0, 7))))
        elif op == "relabel_pod":
            ops.append((op, draw(st.integers(0, 7)), draw(rand_pod())))
        elif op == "node":
            i = draw(st.integers(0, 3))
            ops.append((op, i, draw(rand_node(f"n{i}"))))
        elif op == "drop_node":
            ops.append((op, draw(st.integers(0, 3))))
        else:
            ops.append((op,))
    return ops


def run_history(
    cache: Cache, ops: list[tuple[Any, ...]], pl: ipa.InterPodAffinity, probe: Pod
) -> None:
    """Apply ``ops`` to ``cache``; at each ``cycle``, refresh the snapshot and compare the
    plugin's counts (kept across cycles) with a recount and its answers with the reference."""
    placed: dict[int, Pod] = {}  # slot -> the pod in the cache
    for op in ops:
        kind = op[0]
        if kind == "node":
            _, _i, node = op
            old = cache.node_info(node.name)
            if old is not None and old.node is not None:
                cache.update_node(old.node, node)
            else:
                cache.add_node(node)
        elif kind == "drop_node":
            cache.remove_node(f"n{op[1]}")
        elif kind == "assume":
            _, slot, n, pod = op
            if slot not in placed:
                p = pod.assigned_to(f"n{n}")
                cache.assume_pod(p)
                placed[slot] = p
        elif kind == "confirm":
            # The watch reports the pod bound (maybe on another node than assumed).
            _, slot, n, pod = op
            p = placed.get(slot) or pod
            p = p.assigned_to(f"n{n}")
            cache.add_pod(p)
            placed[slot] = p
        elif kind == "relabel_pod" and op[1] in placed:
            old_pod = placed[op[1]]
            b = make_pod(old_pod.name, old_pod.namespace).uid(old_pod.uid)
            b.labels(**op[2].labels).affinity(op[2].affinity)
            new = b.pod().assigned_to(old_pod.node_name)
            cache.update_pod(old_pod, new)
            placed[op[1]] = new
        elif kind == "forget" and op[1] in placed:
            p = placed[op[1]]
            if cache.is_assumed(p.uid):
                cache.forget_pod(p)
                del placed[op[1]]
        elif kind == "remove" and op[1] in placed:
            cache.remove_pod(placed.pop(op[1]))
        elif kind == "cycle":
            snap = cache.update_snapshot()
            check_against_reference(snap, pl, probe)
            kept = pl._index(snap)
            recount = AffinityIndex.from_nodes(snap.node_infos, TermCache().lenient)
            keys = (ZONE, HOST, RACK)
            assert summary(kept, keys) == summary(recount, keys)


@SETTINGS
@given(cache_histories(), rand_pod("incoming"))
def test_counts_kept_across_cycles_equal_a_recount(ops: list[tuple[Any, ...]], probe: Pod) -> None:
    cache = Cache()
    pl = plugin(cache.snapshot, STORE)
    run_history(cache, [*ops, ("cycle",)], pl, probe)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(cache_histories(), rand_pod("incoming"))
def test_a_trimmed_journal_makes_the_counts_recount(
    monkeypatch: pytest.MonkeyPatch, ops: list[tuple[Any, ...]], probe: Pod
) -> None:
    monkeypatch.setattr(PodJournal, "CAP", 3)
    cache = Cache()
    pl = plugin(cache.snapshot, STORE)
    run_history(cache, [*ops, ("cycle",)], pl, probe)


def test_journal_keeps_positions_when_trimmed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PodJournal, "CAP", 4)
    ni = make_node("n").info()
    j = ni.journal = PodJournal()
    pods = [make_pod(f"p{i}").pod() for i in range(5)]
    for p in pods:
        ni.add_pod(p)
    assert j.end == 5 and j.base == 2
    assert j.since(1) is None  # dropped: the reader must recount
    tail = j.since(3)
    assert tail is not None and [(e[1], e[2]) for e in tail] == [(pods[3], 1), (pods[4], 1)]
    ni.remove_pod(pods[0])
    assert j.since(5) == [(ni, pods[0], -1)]
    assert ni.clone().journal is None  # a copy's changes are not the snapshot's


def test_cycles_catch_up_on_changed_pods_without_recounting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between cycles only the pods that changed are counted again: a cycle's cost does
    not grow with every pod on every node. A node added, removed or relabelled has only
    its own pods counted again (a cluster autoscaler adding a node to a cluster of many
    thousand pods must not cost a recount of all of them)."""
    recounts: list[int] = []
    counted_nodes: list[str] = []
    fill = AffinityIndex._fill
    count_node = AffinityIndex._count_node

    def counting_fill(self: AffinityIndex, nodes: Any) -> None:
        recounts.append(1)
        fill(self, nodes)

    def counting_node(self: AffinityIndex, ni: Any, labels: Any) -> None:
        counted_nodes.append(ni.name)
        count_node(self, ni, labels)

    monkeypatch.setattr(AffinityIndex, "_fill", counting_fill)
    monkeypatch.setattr(AffinityIndex, "_count_node", counting_node)
    cache = Cache()
    for i in range(4):
        cache.add_node(make_node(f"n{i}").label(ZONE, f"z{i % 2}").node())
    pl = plugin(cache.snapshot, STORE)
    anti = affinity(anti=[term({"app": "web"}, key=ZONE)])
    web = [make_pod(f"web{i}").labels(app="web").affinity(anti).pod() for i in range(4)]
    incoming = make_pod("next").labels(app="web").affinity(anti).pod()

    def cycle() -> dict[str, Status | None]:
        snap = cache.update_snapshot()
        state = CycleState()
        assert pl.pre_filter(state, incoming, snap.node_infos)[1] is None
        return {ni.name: pl.filter(state, incoming, ni) for ni in snap.node_infos}

    assert set(cycle().values()) == {None}
    for i, p in enumerate(web[:3]):
        cache.assume_pod(p.assigned_to(f"n{i}"))
        cycle()
    cache.add_pod(web[0].assigned_to("n0"))  # confirmed by the watch
    cache.forget_pod(web[2].assigned_to("n2"))  # its binding failed
    cache.remove_pod(web[1].assigned_to("n1"))  # deleted
    # web0 on n0 (zone z0) keeps zone z0 off limits
    assert cycle() == {"n0": ANTI, "n1": None, "n2": ANTI, "n3": None}
    assert len(recounts) == 1  # the first cycle only
    counted_nodes.clear()

    # n0 moves to zone z9: only n0's pods are counted again, and z0 is free
    old = cache.node_info("n0")
    assert old is not None and old.node is not None
    cache.update_node(old.node, make_node("n0").label(ZONE, "z9").node())
    assert cycle() == {"n0": ANTI, "n1": None, "n2": None, "n3": None}
    assert counted_nodes == ["n0"] and len(recounts) == 1

    # a node joins in z9 and n1 leaves: only the new node is counted
    counted_nodes.clear()
    cache.add_node(make_node("n4").label(ZONE, "z9").node())
    cache.remove_node("n1")
    assert cycle() == {"n0": ANTI, "n2": None, "n3": None, "n4": ANTI}
    assert counted_nodes == ["n4"] and len(recounts) == 1

    # n0 leaves with web0 still bound there (its deletion comes later): z9 is free
    counted_nodes.clear()
    cache.remove_node("n0")
    assert cycle() == {"n2": None, "n3": None, "n4": None}
    assert counted_nodes == [] and len(recounts) == 1
