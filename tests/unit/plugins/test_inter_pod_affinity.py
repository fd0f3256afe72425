"""InterPodAffinity: Filter reasons, the first-pod exception, symmetry, namespaces,
matchLabelKeys, AddPod/RemovePod, scoring with kube's formulas, vector == scalar."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import inter_pod_affinity as ipa
from kubesched.simulator.engine import simulate
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

ZONE = "zone"
HOST = "kubernetes.io/hostname"


class NamespaceStore:
    def __init__(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        self._ns = {
            n: {"kind": "Namespace", "metadata": {"name": n, "labels": dict(lbl)}}
            for n, lbl in namespaces.items()
        }

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._ns.get(name) if kind == "Namespace" else None

    def list(self, kind: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        return list(self._ns.values()) if kind == "Namespace" else []


def term(match: Mapping[str, str] | None = None, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": key}
    if match is not None:
        t["labelSelector"] = {"matchLabels": dict(match)}
    t.update(extra)
    return t


def affinity(
    req: Sequence[dict[str, Any]] = (),
    anti: Sequence[dict[str, Any]] = (),
    pref: Sequence[tuple[int, dict[str, Any]]] = (),
    pref_anti: Sequence[tuple[int, dict[str, Any]]] = (),
) -> dict[str, Any]:
    r = "requiredDuringSchedulingIgnoredDuringExecution"
    p = "preferredDuringSchedulingIgnoredDuringExecution"
    out: dict[str, Any] = {"podAffinity": {}, "podAntiAffinity": {}}
    if req:
        out["podAffinity"][r] = list(req)
    if pref:
        out["podAffinity"][p] = [{"weight": w, "podAffinityTerm": t} for w, t in pref]
    if anti:
        out["podAntiAffinity"][r] = list(anti)
    if pref_anti:
        out["podAntiAffinity"][p] = [{"weight": w, "podAffinityTerm": t} for w, t in pref_anti]
    return {k: v for k, v in out.items() if v}


def cluster(placements: Mapping[str, Sequence[Pod]], zones: Mapping[str, str | None]) -> Snapshot:
    infos = []
    for name, zone in zones.items():
        b = make_node(name)
        if zone is not None:
            b.label(ZONE, zone)
        infos.append(b.info(*[p.assigned_to(name) for p in placements.get(name, ())]))
    return Snapshot(infos)


def plugin(
    snap: Snapshot, store: NamespaceStore | None = None, **args: Any
) -> ipa.InterPodAffinity:
    h = FakeHandle(snap)
    if store is not None:
        h._store = store  # type: ignore[assignment]
    return ipa.new(ipa.Args.model_validate(args), h)


def run_filter(
    pl: ipa.InterPodAffinity, snap: Snapshot, pod: Pod
) -> tuple[Status | None, dict[str, Status | None]]:
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    if s is not None and s.code == Code.SKIP:
        return None, {ni.name: None for ni in snap.node_infos}  # Filter does not run
    if s is not None:
        return s, {}
    out = {ni.name: pl.filter(state, pod, ni) for ni in snap.node_infos}
    mask = pl.filter_mask(state, pod, snap)
    assert mask is not None
    assert [bool(x) for x in mask] == [v is None for v in out.values()]
    return None, out


AFF = Status.unresolvable(ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin="InterPodAffinity")
ANTI = Status.unschedulable(ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin="InterPodAffinity")
EXIST = Status.unschedulable(
    ipa.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin="InterPodAffinity"
)

db = make_pod("db").labels(app="db").pod()
web_anti_web = (
    make_pod("web0").labels(app="web").affinity(affinity(anti=[term({"app": "web"})])).pod()
)

ZONES3 = {"a1": "a", "a2": "a", "b1": "b", "c1": None}


@pytest.mark.parametrize(
    ("placements", "pod", "expected"),
    [
        pytest.param(
            {"a1": [db]},
            make_pod("p").affinity(affinity(req=[term({"app": "db"})])).pod(),
            {"a1": None, "a2": None, "b1": AFF, "c1": AFF},
            id="affinity-same-zone-only-and-missing-key-fails",
        ),
        pytest.param(
            {"a1": [db]},
            make_pod("p").affinity(affinity(req=[term({"app": "cache"})])).pod(),
            {"a1": AFF, "a2": AFF, "b1": AFF, "c1": AFF},
            id="affinity-no-match-anywhere",
        ),
        pytest.param(
            {"a1": [db]},
            make_pod("p")
            .labels(app="cache")
            .affinity(affinity(req=[term({"app": "cache"})]))
            .pod(),
            {"a1": None, "a2": None, "b1": None, "c1": AFF},
            id="first-pod-of-group-matches-itself",
        ),
        pytest.param(
            {"a1": [make_pod("c").labels(app="cache").pod()]},
            make_pod("p")
            .labels(app="cache")
            .affinity(affinity(req=[term({"app": "cache"})]))
            .pod(),
            {"a1": None, "a2": None, "b1": AFF, "c1": AFF},
            id="self-match-exception-off-once-a-pod-matches",
        ),
        pytest.param(
            {"a1": [db]},
            make_pod("p").affinity(affinity(anti=[term({"app": "db"})])).pod(),
            {"a1": ANTI, "a2": ANTI, "b1": None, "c1": None},
            id="anti-affinity-zone",
        ),
        pytest.param(
            {"a1": [db]},
            make_pod("p").affinity(affinity(anti=[term({"app": "db"}, key=HOST)])).pod(),
            {"a1": ANTI, "a2": None, "b1": None, "c1": None},
            id="anti-affinity-hostname",
        ),
        pytest.param(
            {"b1": [web_anti_web]},
            make_pod("p").labels(app="web").pod(),
            {"a1": None, "a2": None, "b1": EXIST, "c1": None},
            id="existing-pods-anti-affinity-symmetry",
        ),
        pytest.param(
            {"b1": [web_anti_web]},
            make_pod("p", "other").labels(app="web").pod(),
            {"a1": None, "a2": None, "b1": None, "c1": None},
            id="existing-term-defaults-to-its-own-namespace",
        ),
        pytest.param(
            {"a1": [make_pod("d", "other").labels(app="db").pod()]},
            make_pod("p").affinity(affinity(req=[term({"app": "db"}, namespaces=["other"])])).pod(),
            {"a1": None, "a2": None, "b1": AFF, "c1": AFF},
            id="namespaces-list",
        ),
        pytest.param(
            {"a1": [make_pod("d", "other").labels(app="db").pod()]},
            make_pod("p").affinity(affinity(req=[term({"app": "db"})])).pod(),
            {"a1": AFF, "a2": AFF, "b1": AFF, "c1": AFF},
            id="own-namespace-by-default",
        ),
        pytest.param(
            {"a1": [make_pod("d", "other").labels(app="db").pod()]},
            make_pod("p").affinity(affinity(req=[term({"app": "db"}, namespaceSelector={})])).pod(),
            {"a1": None, "a2": None, "b1": AFF, "c1": AFF},
            id="empty-namespace-selector-means-all",
        ),
        pytest.param(
            {
                "a1": [make_pod("d", "other").labels(app="db").pod()],
                "b1": [make_pod("e", "team").labels(app="db").pod()],
            },
            make_pod("p")
            .affinity(
                affinity(
                    req=[term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "x"}})]
                )
            )
            .pod(),
            {"a1": AFF, "a2": AFF, "b1": None, "c1": AFF},
            id="namespace-selector-by-namespace-labels",
        ),
        pytest.param(
            {
                "a1": [make_pod("d").labels(app="db", ver="1").pod()],
                "b1": [make_pod("e").labels(app="db", ver="2").pod()],
            },
            make_pod("p")
            .labels(ver="2")
            .affinity(affinity(req=[term({"app": "db"}, matchLabelKeys=["ver"])]))
            .pod(),
            {"a1": AFF, "a2": AFF, "b1": None, "c1": AFF},
            id="match-label-keys",
        ),
        pytest.param(
            {
                "a1": [make_pod("d").labels(app="db", ver="1").pod()],
                "b1": [make_pod("e").labels(app="db", ver="2").pod()],
            },
            make_pod("p")
            .labels(ver="2")
            .affinity(affinity(anti=[term({"app": "db"}, mismatchLabelKeys=["ver"])]))
            .pod(),
            {"a1": ANTI, "a2": ANTI, "b1": None, "c1": None},
            id="mismatch-label-keys",
        ),
    ],
)
def test_filter(
    placements: Mapping[str, Sequence[Pod]], pod: Pod, expected: Mapping[str, Status | None]
) -> None:
    snap = cluster(placements, ZONES3)
    store = NamespaceStore({"default": {}, "other": {}, "team": {"team": "x"}})
    pl = plugin(snap, store)
    s, out = run_filter(pl, snap, pod)
    assert s is None
    assert out == expected


def test_pre_filter_skips_without_terms_or_matching_existing_terms() -> None:
    snap = cluster({"a1": [db]}, ZONES3)
    pl = plugin(snap)
    _, s = pl.pre_filter(CycleState(), make_pod("p").pod(), snap.node_infos)
    assert s is not None and s.code == Code.SKIP
    snap = cluster({"a1": [web_anti_web]}, ZONES3)
    pl = plugin(snap)
    _, s = pl.pre_filter(CycleState(), make_pod("p").labels(app="db").pod(), snap.node_infos)
    assert s is not None and s.code == Code.SKIP


def test_pre_filter_rejects_unparsable_selector() -> None:
    bad = term()
    bad["labelSelector"] = {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}
    pod = make_pod("p").affinity(affinity(req=[bad])).pod()
    snap = cluster({}, ZONES3)
    _, s = plugin(snap).pre_filter(CycleState(), pod, snap.node_infos)
    assert s is not None and s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.message().startswith("parsing pod: ")


def test_add_and_remove_pod_update_counts() -> None:
    """Preemption and nominated pods: removing the only matching pod unblocks the
    anti-affinity domain; adding a nominated matching pod blocks it (on a clone)."""
    snap = cluster({"a1": [db]}, ZONES3)
    pl = plugin(snap)
    pod = make_pod("p").labels(app="web").affinity(affinity(anti=[term({"app": "db"})])).pod()
    state = CycleState()
    pl.pre_filter(state, pod, snap.node_infos)
    a1, b1 = snap.get("a1"), snap.get("b1")
    assert a1 is not None and b1 is not None
    clone = state.clone()
    assert pl.remove_pod(clone, pod, a1.pods[0], a1) is None
    assert pl.filter(clone, pod, a1) is None
    assert pl.filter(state, pod, a1) == ANTI  # the original state is untouched
    assert pl.add_pod(clone, pod, make_pod("d2").labels(app="db").pod(), b1) is None
    assert pl.filter(clone, pod, b1) == ANTI
    # An added pod whose anti-affinity matches the incoming pod (symmetry).
    assert pl.add_pod(clone, pod, web_anti_web, snap.get("c1") or b1) is None


def scores(
    pl: ipa.InterPodAffinity, snap: Snapshot, pod: Pod
) -> tuple[Status | None, list[int], list[int]]:
    state = CycleState()
    s = pl.pre_score(state, pod, snap.node_infos)
    if s is not None:
        return s, [], []
    raw = [pl.score(state, pod, ni)[0] for ni in snap.node_infos]
    rows = np.arange(len(snap), dtype=np.intp)
    vec = pl.score_vector(state, pod, snap, rows)
    assert vec is not None and vec.tolist() == raw
    arr = np.array(raw, dtype=np.int64)
    pl.normalize_score(state, pod, arr)
    return None, raw, arr.tolist()


def test_score_preferred_terms_of_incoming_pod() -> None:
    # zone a: one db (affinity weight 5) and one cache (anti weight 2); zone b: one db.
    snap = cluster(
        {"a1": [db, make_pod("c").labels(app="cache").pod()], "b1": [db]},
        {"a1": "a", "a2": "a", "b1": "b", "c1": "c"},
    )
    pod = (
        make_pod("p")
        .affinity(
            affinity(pref=[(5, term({"app": "db"}))], pref_anti=[(2, term({"app": "cache"}))])
        )
        .pod()
    )
    s, raw, norm = scores(plugin(snap), snap, pod)
    assert s is None
    # a: 5 - 2 = 3; b: 5; c: 0. min 0, max 5: 100 * (s - 0) / 5.
    assert raw == [3, 3, 5, 0]
    assert norm == [60, 60, 100, 0]


def test_score_existing_pods_terms_and_hard_weight() -> None:
    req_pod = make_pod("r").affinity(affinity(req=[term({"app": "web"})])).pod()
    pref_pod = make_pod("f").affinity(affinity(pref_anti=[(7, term({"app": "web"}))])).pod()
    snap = cluster({"a1": [req_pod], "b1": [pref_pod]}, {"a1": "a", "b1": "b", "c1": "c"})
    pod = make_pod("p").labels(app="web").pod()
    # hardPodAffinityWeight 4: a = +4, b = -7, c = 0 -> (s + 7) / 11 * 100.
    s, raw, norm = scores(plugin(snap, hardPodAffinityWeight=4), snap, pod)
    assert s is None
    assert raw == [4, -7, 0]
    assert norm == [100, 0, int(100 * (7 / 11))]
    s, raw, norm = scores(plugin(snap, hardPodAffinityWeight=0), snap, pod)
    assert raw == [0, -7, 0] and norm == [100, 0, 100]


def test_score_skips() -> None:
    snap = cluster({"a1": [db]}, ZONES3)
    pod = make_pod("p").pod()
    s, _, _ = scores(plugin(snap), snap, pod)
    assert s is not None and s.code == Code.SKIP  # nobody has affinity
    pref_pod = make_pod("f").affinity(affinity(pref=[(3, term({"app": "web"}))])).pod()
    snap = cluster({"a1": [pref_pod]}, ZONES3)
    web = make_pod("p").labels(app="web").pod()
    s, raw, _ = scores(plugin(snap), snap, web)
    assert s is None and raw == [3, 3, 0, 0]
    s, _, _ = scores(plugin(snap, ignorePreferredTermsOfExistingPods=True), snap, web)
    assert s is not None and s.code == Code.SKIP


def test_args_validation() -> None:
    assert ipa.Args().hard_pod_affinity_weight == 1
    assert ipa.Args().ignore_preferred_terms_of_existing_pods is False
    with pytest.raises(ValueError):
        ipa.Args.model_validate({"hardPodAffinityWeight": 101})
    with pytest.raises(ValueError):
        ipa.Args.model_validate({"bogus": 1})


def test_events_and_hints() -> None:
    pl = plugin(cluster({}, ZONES3))
    regs = pl.events_to_register()
    assert [r.event.resource.value for r in regs] == ["Pod", "Node"]
    pod = make_pod("p").affinity(affinity(req=[term({"app": "db"})])).pod()
    pod_hint, node_hint = regs[0].hint, regs[1].hint
    assert pod_hint is not None and node_hint is not None
    bound_db = make_pod("d").labels(app="db").node("a1").pod()
    assert pod_hint(pod, None, bound_db) is True
    assert pod_hint(pod, None, make_pod("d").labels(app="db").pod()) is False  # unscheduled
    assert pod_hint(pod, None, make_pod("x").node("a1").pod()) is False
    assert node_hint(pod, None, make_node("n").label(ZONE, "z").node()) is True
    assert node_hint(pod, None, make_node("n").node()) is False
    # Deleting a pod whose anti-affinity blocked this one requeues it.
    web = make_pod("w").labels(app="web").pod()
    assert pod_hint(web, make_pod("x").node("a1").affinity(dict(web_anti_web.affinity)).pod(), None)


def test_v137_hints() -> None:
    pl = plugin(cluster({}, ZONES3))
    pod_hint, node_hint = (r.hint for r in pl.events_to_register())
    assert pod_hint is not None and node_hint is not None
    # Two anti-affinity terms: a deleted pod matching either one frees the pod
    # (v1.34 required it to match both).
    two = affinity(anti=[term({"app": "db"}), term({"tier": "x"}, key=HOST)])
    pod = make_pod("p").affinity(two).pod()
    db = make_pod("d").labels(app="db").node("a1").pod()
    assert pod_hint(pod, db, None) is True
    assert pod_hint(pod, make_pod("o").labels(app="web").node("a1").pod(), None) is False
    # A relabelled pod that stops matching one of them (and matches none now).
    assert pod_hint(pod, db, make_pod("d").labels(app="web").node("a1").pod()) is True
    # A nominated (not yet bound) pod leaving counts like a placed one.
    assert pod_hint(pod, make_pod("d").labels(app="db").nominated("a1").pod(), None) is True
    assert pod_hint(pod, make_pod("d").labels(app="db").pod(), None) is False
    # The pod's own label update always requeues it.
    me = make_pod("p").uid("me").affinity(two).pod()
    assert pod_hint(me, me, make_pod("p").uid("me").labels(a="b").affinity(two).pod()) is True
    # Nodes: affinity cares about a topology key appearing or changing value.
    aff = make_pod("p").affinity(affinity(req=[term({"app": "db"})])).pod()
    z1, z2 = make_node("n").label(ZONE, "z1").node(), make_node("n").label(ZONE, "z2").node()
    assert node_hint(aff, z1, z2) is True
    assert node_hint(aff, z1, make_node("n").label(ZONE, "z1").label("x", "y").node()) is False
    assert node_hint(aff, z1, make_node("n").node()) is False  # lost the key
    # Anti-affinity: any new node; a node losing or changing the key.
    anti = make_pod("p").affinity(affinity(anti=[term({"app": "db"})])).pod()
    assert node_hint(anti, None, make_node("n").node()) is True
    assert node_hint(anti, z1, make_node("n").node()) is True
    assert node_hint(anti, make_node("n").node(), z1) is False
    assert [r.event.action for r in pl.events_to_register()][1] == (
        ActionType.ADD | ActionType.UPDATE_NODE_LABEL
    )


@st.composite
def affinity_cases(draw: st.DrawFn) -> tuple[Snapshot, Pod]:
    apps = ("a", "b")
    keys = (ZONE, HOST)

    def rand_term() -> dict[str, Any]:
        return term({"app": draw(st.sampled_from(apps))}, key=draw(st.sampled_from(keys)))

    def rand_pod(name: str) -> Pod:
        b = make_pod(name).labels(app=draw(st.sampled_from(apps)))
        kinds = draw(st.lists(st.sampled_from(("req", "anti", "pref", "pref_anti")), max_size=2))
        a = affinity(
            req=[rand_term() for k in kinds if k == "req"],
            anti=[rand_term() for k in kinds if k == "anti"],
            pref=[(draw(st.integers(1, 5)), rand_term()) for k in kinds if k == "pref"],
            pref_anti=[(draw(st.integers(1, 5)), rand_term()) for k in kinds if k == "pref_anti"],
        )
        if a:
            b.affinity(a)
        return b.pod()

    n = draw(st.integers(1, 6))
    infos: list[NodeInfo] = []
    for i in range(n):
        b = make_node(f"n{i}")
        z = draw(st.sampled_from(("z1", "z2", None)))
        if z:
            b.label(ZONE, z)
        infos.append(
            b.info(
                *[rand_pod(f"e{i}{j}").assigned_to(f"n{i}") for j in range(draw(st.integers(0, 2)))]
            )
        )
    return Snapshot(infos), rand_pod("incoming")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(affinity_cases())
def test_vector_equals_scalar(case: tuple[Snapshot, Pod]) -> None:
    snap, pod = case
    pl = plugin(snap)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    if s is None:
        mask = pl.filter_mask(state, pod, snap)
        assert mask is not None
        assert mask.tolist() == [pl.filter(state, pod, ni) is None for ni in snap.node_infos]
    scores(pl, snap, pod)  # asserts score_vector == score


def test_memo_follows_cluster_changes() -> None:
    """Counts kept across cycles follow pods added to nodes between cycles."""
    snap = cluster({}, ZONES3)
    pl = plugin(snap)
    pod = make_pod("p").affinity(affinity(anti=[term({"app": "db"})])).pod()
    assert run_filter(pl, snap, pod)[1]["a1"] is None
    a1 = snap.get("a1")
    assert a1 is not None
    a1.add_pod(db.assigned_to("a1"))
    snap.refresh_row(a1)
    assert run_filter(pl, snap, pod)[1]["a2"] == ANTI
    a1.remove_pod(a1.pods[0])
    snap.refresh_row(a1)
    assert run_filter(pl, snap, pod)[1]["a2"] is None


def _node(name: str, zone: str) -> dict[str, Any]:
    return make_node(name).zone(zone).obj()


def test_simulated_placement() -> None:
    """A web tier that must share a zone with its db, spread one per node, and a
    job that must not share a zone with the db."""
    anti_self = term({"app": "web"}, key=HOST)
    with_db = term({"app": "db"}, key="topology.kubernetes.io/zone")
    objs = [
        _node("a1", "a"),
        _node("a2", "a"),
        _node("b1", "b"),
        _node("b2", "b"),
        make_pod("db").labels(app="db").node("b1").obj(),
        *[
            make_pod(f"web{i}")
            .labels(app="web")
            .affinity(affinity(req=[with_db], anti=[anti_self]))
            .obj()
            for i in range(3)
        ],
        make_pod("batch")
        .affinity(affinity(anti=[term({"app": "db"}, key="topology.kubernetes.io/zone")]))
        .obj(),
    ]
    result = simulate(objs, seed=0)
    by_name = {p.name: p for p in result.pods}
    webs = [by_name[f"web{i}"] for i in range(3)]
    assert sorted(p.node or "" for p in webs[:2]) == ["b1", "b2"]
    assert webs[2].status == "Unschedulable"
    assert "node(s) didn't match pod affinity rules" in webs[2].message
    assert "node(s) didn't match pod anti-affinity rules" in webs[2].message
    assert by_name["batch"].node in ("a1", "a2")


def test_scenario_files() -> None:
    import pathlib

    import yaml

    base = pathlib.Path(__file__).parents[2] / "scenarios" / "inter_pod_affinity"

    def run(name: str) -> dict[str, Any]:
        objs = [o for o in yaml.safe_load_all((base / name).read_text()) if o]
        for o in objs:
            if o["kind"] == "Pod":
                o["spec"]["schedulerName"] = "kubesched"
        return {p.name: p for p in simulate(objs, seed=0).pods}

    r = run("web-with-db-one-per-node.yaml")
    assert sorted(r[n].node or "" for n in ("web-0", "web-1")) == ["b1", "b2"]
    assert r["web-2"].status == "Unschedulable"
    assert r["batch"].node in ("a1", "a2")
    r = run("symmetry-and-first-pod.yaml")
    assert r["web"].node == "n2"
    assert r["group-0"].status == "Scheduled"
