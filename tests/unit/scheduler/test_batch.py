"""Opportunistic batching: which pods share a signature, and placements equal to a full
cycle's (the property test), whatever happens to the cluster between pods."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubesched.backend.cache import Cache
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.signature import PodSigner, signing_plugins
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Node, Pod
from kubesched.operator.settings import Settings
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError
from kubesched.scheduler.batch import BatchMetrics, OpportunisticBatch
from kubesched.scheduler.signers import plugin_signer
from tests.builders import PodBuilder, make_node, make_pod

ANTI_A = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}
        ]
    }
}
PREFER_B = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "b"}},
                    "topologyKey": "zone",
                },
            }
        ]
    }
}
PREFER_Z1 = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]
                },
            }
        ]
    }
}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "a"}},
    }
]


# -- a tiny scheduler: the cycle of Scheduler.schedule_one, without the loop ---------------------
class NoObjects:
    """An object store with no Services, PVCs, namespaces... (pods and nodes only)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]:
        return []


@dataclass
class Harness:
    cache: Cache
    fwk: Framework
    batch: OpportunisticBatch | None
    alg: Algorithm = field(default_factory=lambda: Algorithm(random.Random(0)))
    cycle: int = 0

    def place(self, pod: Pod) -> tuple[str | None, str]:
        """Schedule ``pod`` (assumed on success): (node or None, FitError message)."""
        snap = self.cache.update_snapshot()
        self.cycle += 1
        if self.batch is not None:
            self.batch.begin(self.fwk, pod, self.cycle)
        state = CycleState()
        try:
            result = self.alg.schedule_pod(self.fwk, state, pod, snap, self.batch)
        except FitError as e:
            if self.batch is not None:
                self.batch.finish(False)
            return None, str(e)
        assumed = pod.assigned_to(result.node_name)
        self.cache.assume_pod(assumed)
        s = self.fwk.run_reserve(state, assumed, result.node_name)
        if self.batch is not None:
            self.batch.finish(s is None)
        if s is not None:
            self.fwk.run_unreserve(state, assumed, result.node_name)
            self.cache.forget_pod(assumed)
            return None, s.message()
        return result.node_name, ""


def harness(nodes: list[Node], existing: list[Pod], batching: bool) -> Harness:
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    for p in existing:
        cache.add_pod(p)
    services = FrameworkServices(
        store=NoObjects(),
        snapshot=lambda: cache.snapshot,
        clock=lambda: 0.0,
        rng=random.Random(0),
    )
    fwk = compile_profile(default_profile_spec(), services).framework
    batch = OpportunisticBatch("kubesched", BatchMetrics(CollectorRegistry())) if batching else None
    return Harness(cache, fwk, batch)


def best_nodes(fwk: Framework, pod: Pod, snap: Snapshot) -> tuple[set[str], str]:
    """What a full cycle (no batch) may choose on ``snap``: the nodes with the top score
    (one when it is unique), or nothing and the FitError message."""
    alg = Algorithm(random.Random(1))
    state = CycleState()
    try:
        alg.schedule_pod(fwk, CycleState(), pod, snap)
    except FitError as e:
        return set(), str(e)
    rows, _ = alg._find_nodes_that_fit(fwk, state, pod, snap)
    infos = snap.node_infos
    if len(rows) == 1:
        return {infos[int(rows[0])].name}, ""
    assert fwk.run_pre_score(state, pod, [infos[int(r)] for r in rows]) is None
    total, _, s = fwk.run_score(state, pod, snap, rows)
    assert s is None
    return {infos[int(rows[i])].name for i in np.flatnonzero(total == total.max())}, ""


# -- strategies ------------------------------------------------------------------------------------
@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        b = make_node(f"n{i}").label("zone", draw(st.sampled_from(["z1", "z2", "z3"])))
        b.alloc(
            cpu=draw(st.sampled_from(["1", "2", "4"])),
            memory=draw(st.sampled_from(["1Gi", "4Gi", "8Gi"])),
            pods=str(draw(st.integers(1, 8))),
        )
        if draw(st.integers(0, 3)) == 0:
            b.taint("soft", "x", "PreferNoSchedule")
        if draw(st.integers(0, 5)) == 0:
            b.taint("hard", "x", "NoSchedule")
        if draw(st.booleans()):
            b.image("img-a", draw(st.sampled_from([100 * 2**20, 800 * 2**20])))
        nodes.append(b.node())
    existing = []
    for j in range(draw(st.integers(0, 6))):
        node = draw(st.sampled_from(nodes)).name
        pb = make_pod(f"e{j}").uid(f"uid-e{j}").node(node).labels(app=draw(st.sampled_from("ab")))
        pb.req(cpu=draw(st.sampled_from(["100m", "500m"])), memory="256Mi")
        kind = draw(st.integers(0, 3))
        if kind == 0:
            pb.affinity(ANTI_A)
        elif kind == 1:
            pb.affinity(PREFER_B)
        existing.append(pb.pod())
    return nodes, existing


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any]:
    b = make_pod("template").labels(app=draw(st.sampled_from("ab")))
    cpu = draw(st.sampled_from([None, "100m", "300m", "1"]))
    if cpu is not None:
        b.req(cpu=cpu, memory=draw(st.sampled_from(["128Mi", "1Gi"])))
    if draw(st.booleans()):
        b.toleration("soft", "x", "PreferNoSchedule")
    if draw(st.integers(0, 3)) == 0:
        b.node_selector(zone=draw(st.sampled_from(["z1", "z2"])))
    extra = draw(st.integers(0, 7))
    if extra == 0:
        b.host_port(8080)
    elif extra == 1:
        b.affinity(PREFER_Z1)
    elif extra == 2:
        b.image("img-a")
    elif extra == 3:
        b.affinity(ANTI_A)  # unbatchable
    elif extra == 4:
        b.spec(topologySpreadConstraints=SPREAD)  # unbatchable
    return b.obj()


def instantiate(template: dict[str, Any], n: int) -> Pod:
    obj = copy.deepcopy(template)
    name = f"p{n:03}"
    obj["metadata"]["name"] = name
    obj["metadata"]["uid"] = f"uid-{name}"
    return Pod(obj)


Event = tuple[str, int]


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[int, list[Event]]]:
    """Pods (template indices, runs of the same one likely) each preceded by cluster
    events: delete an assigned pod, taint or untaint a node, relabel a node."""
    out = []
    for _ in range(draw(st.integers(1, 24))):
        events: list[Event] = []
        if draw(st.integers(0, 4)) == 0:
            events.append(
                (
                    draw(st.sampled_from(["delete", "taint", "untaint", "relabel"])),
                    draw(st.integers(0, 99)),
                )
            )
        out.append((draw(st.integers(0, 2)), events))
    return out


def apply_event(h: Harness, event: Event, nodes: list[Node]) -> None:
    kind, k = event
    if kind == "delete":
        pods = sorted((p for ni in h.cache.node_infos() for p in ni.pods), key=lambda p: p.uid)
        if pods:
            victim = pods[k % len(pods)]
            if h.cache.is_assumed(victim.uid):
                h.cache.forget_pod(victim)
            else:
                h.cache.remove_pod(victim)
        return
    ni = h.cache.node_info(nodes[k % len(nodes)].name)
    assert ni is not None and ni.node is not None
    raw = copy.deepcopy(dict(ni.node.raw))
    if kind == "taint":
        raw["spec"]["taints"] = [{"key": "hard", "value": "x", "effect": "NoSchedule"}]
    elif kind == "untaint":
        raw["spec"]["taints"] = []
    else:
        raw["metadata"]["labels"]["zone"] = "z3"
    h.cache.update_node(ni.node, Node(raw))


# -- the property --------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    tmpl=st.lists(templates(), min_size=1, max_size=3),
    script=scripts(),
)
def test_batched_placements_are_what_a_full_cycle_would_choose(
    cluster: tuple[list[Node], list[Pod]],
    tmpl: list[dict[str, Any]],
    script: list[tuple[int, list[Event]]],
) -> None:
    """Under 100 nodes every cycle examines every node, so the full cycle's choice is
    exact: the batched cycle must pick a node among its top-scoring ones (the very node
    when it is unique), or fail with the same message, pod after pod, with pods deleted
    and nodes changed in between."""
    nodes, existing = cluster
    h = harness(nodes, existing, batching=True)
    assert h.batch is not None
    for n, (i, events) in enumerate(script):
        for ev in events:
            apply_event(h, ev, nodes)
        pod = instantiate(tmpl[i % len(tmpl)], n)
        snap = h.cache.update_snapshot()
        want, want_msg = best_nodes(h.fwk, pod, snap)
        got, got_msg = h.place(pod)
        event("from the batch" if h.batch.hinted else "full cycle")
        if not want:
            assert got is None and got_msg == want_msg
        else:
            assert got in want, (got, want, h.batch.hinted)


def test_identical_pods_are_batched_and_spread_like_full_cycles() -> None:
    nodes = [make_node(f"n{i}").alloc(cpu="4", memory="8Gi", pods="10").node() for i in range(10)]
    placed = {}
    for batching in (False, True):
        h = harness(nodes, [], batching)
        placed[batching] = [
            h.place(make_pod(f"p{j}").req(cpu="500m", memory="1Gi").pod())[0] for j in range(30)
        ]
        if h.batch is not None:
            # A full cycle, then as many hints as it had candidates (10), three times.
            assert h.batch.batched_pods == 27
    # Least-allocated scoring spreads 30 pods 3 per node either way.
    for batching in (False, True):
        assert sorted(placed[batching].count(f"n{i}") for i in range(10)) == [3] * 10


def test_a_different_pod_in_between_ends_the_batch() -> None:
    nodes = [make_node(f"n{i}").alloc(cpu="4", memory="8Gi").node() for i in range(5)]
    h = harness(nodes, [], batching=True)
    assert h.batch is not None
    small = make_pod("s").req(cpu="100m")
    h.place(instantiate(small.obj(), 0))
    h.place(instantiate(small.obj(), 1))
    assert h.batch.batched_pods == 1
    h.place(instantiate(make_pod("big").req(cpu="2").obj(), 2))
    h.place(instantiate(small.obj(), 3))
    assert h.batch.batched_pods == 1
    flushed = {
        s.labels["reason"]: s.value
        for m in h.batch.metrics.flushed.collect()
        for s in m.samples
        if s.name.endswith("_total")
    }
    assert flushed == {"pod_incompatible": 2.0}


# -- signatures ----------------------------------------------------------------------------------------
def signature(b: PodBuilder) -> bytes | None:
    fwk = compile_profile(default_profile_spec(), FrameworkServices()).framework
    return PodSigner(signing_plugins(fwk.chain), plugin_signer).sign(b.pod())


UNBATCHABLE = {
    "pod affinity": make_pod("p").affinity(PREFER_B),
    "pod anti-affinity": make_pod("p").affinity(ANTI_A),
    "topology spread": make_pod("p").spec(topologySpreadConstraints=SPREAD),
    "persistent volume claim": make_pod("p").pvc("data"),
    "ephemeral volume": make_pod("p").volume("scratch", ephemeral={"volumeClaimTemplate": {}}),
    "resource claim": make_pod("p").spec(resourceClaims=[{"name": "gpu"}]),
    "pod group": make_pod("p").label("kubesched.dev/pod-group", "g"),
}


@pytest.mark.parametrize("builder", UNBATCHABLE.values(), ids=UNBATCHABLE.keys())
def test_unbatchable_pods_have_no_signature(builder: PodBuilder) -> None:
    assert signature(builder) is None


def test_pod_specific_volumes_and_names_do_not_split_signatures() -> None:
    a = make_pod("a").req(cpu="1").volume("token", projected={"sources": []})
    b = make_pod("b").req(cpu="1").volume("cfg", configMap={"name": "b"})
    assert signature(a) is not None
    assert signature(a) == signature(b)


SPLITS = {
    "requests": make_pod("x").req(cpu="2"),
    "tolerations": make_pod("x").req(cpu="1").toleration("k", "v", "NoSchedule"),
    "node selector": make_pod("x").req(cpu="1").node_selector(zone="z1"),
    "host ports": make_pod("x").req(cpu="1").host_port(80),
    "labels": make_pod("x").req(cpu="1").labels(app="b"),
    "namespace": make_pod("x", namespace="other").req(cpu="1"),
    "image": make_pod("x").req(cpu="1").image("nginx"),
    "scheduler name": make_pod("x").req(cpu="1").scheduler("other"),
}


@pytest.mark.parametrize("builder", SPLITS.values(), ids=SPLITS.keys())
def test_what_plugins_read_splits_signatures(builder: PodBuilder) -> None:
    base = signature(make_pod("base").req(cpu="1"))
    other = signature(builder)
    assert base is not None and other is not None
    assert other != base


def test_a_plugin_that_cannot_sign_turns_batching_off_for_the_profile() -> None:
    class OutOfTree:
        name = "OutOfTree"

    fwk = compile_profile(default_profile_spec(), FrameworkServices()).framework
    signer = PodSigner([*signing_plugins(fwk.chain), OutOfTree()], plugin_signer)
    assert signer.unsupported == ["OutOfTree"]
    assert signer.sign(make_pod("p").pod()) is None


def test_the_setting_turns_batching_off_like_the_feature_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBESCHED_OPPORTUNISTIC_BATCHING", raising=False)
    assert Settings.load().opportunistic_batching is True
    monkeypatch.setenv("KUBESCHED_OPPORTUNISTIC_BATCHING", "false")
    assert Settings.load().opportunistic_batching is False
