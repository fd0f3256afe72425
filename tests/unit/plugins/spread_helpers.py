"""Builders shared by the PodTopologySpread tests."""

from __future__ import annotations

from typing import Any

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import pod_topology_spread as pts
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NOT_MATCH = Status.unschedulable(
    "node(s) didn't match pod topology spread constraints", plugin="PodTopologySpread"
)
MISSING = Status.unresolvable(
    "node(s) didn't match pod topology spread constraints (missing required label)",
    plugin="PodTopologySpread",
)


def tsc(
    max_skew: int = 1,
    key: str = ZONE,
    when: str = "DoNotSchedule",
    selector: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    c["labelSelector"] = {"matchLabels": {"app": "web"}} if selector is None else selector
    c.update(extra)
    return c


def web(name: str, **labels: str) -> PodBuilder:
    return make_pod(name).labels(app="web", **labels)


def spreading(*constraints: dict[str, Any], name: str = "incoming") -> PodBuilder:
    return web(name).spec(topologySpreadConstraints=list(constraints))


def cluster(*nodes: tuple[NodeBuilder, int]) -> Snapshot:
    """Nodes, each with that many ``app: web`` pods on it."""
    infos = []
    for nb, n in nodes:
        name = nb.obj()["metadata"]["name"]
        infos.append(nb.info(*(web(f"{name}-p{i}").node(name).pod() for i in range(n))))
    return Snapshot(infos)


def plugin(snap: Snapshot, store: Any = None, **args: Any) -> pts.PodTopologySpread:
    handle = FakeHandle(snap)
    if store is not None:
        handle._store = store
    return pts.new(pts.Args.model_validate(args), handle)


def run_filter(snap: Snapshot, pod: Pod, **args: Any) -> dict[str, Status | None]:
    pl = plugin(snap, **args)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, snap.node_infos)
    assert s is None
    out = {ni.name: pl.filter(state, pod, ni) for ni in snap.node_infos}
    mask = pl.filter_mask(state, pod, snap)
    assert mask is not None
    assert mask.tolist() == [out[ni.name] is None for ni in snap.node_infos]
    return out


def three_zones(a: int, b: int, c: int) -> Snapshot:
    return cluster(
        (make_node("a").zone("z1"), a),
        (make_node("b").zone("z2"), b),
        (make_node("c").zone("z3"), c),
    )
