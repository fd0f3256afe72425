"""The scheduler cache: assumed pods count at once, confirmations and failures settle
them; nodes are ordered like kube-scheduler's node tree; the snapshot stays exact."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.backend.cache import Cache, CacheError
from kubesched.framework.resources import Resource
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Node, Pod
from tests.builders import make_node, make_pod
from tests.unit.framework.snapshots import assert_same_as_fresh


def cache_with(*nodes: Node) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    return cache


def requested_cpu(cache: Cache, node: str) -> int:
    ni = cache.node_info(node)
    assert ni is not None
    return ni.requested.milli_cpu


# -- assume / bind / confirm / forget -------------------------------------------------------------
def test_assumed_pod_counts_until_confirmed_then_still_counts_once() -> None:
    cache = cache_with(make_node("n1").node())
    pod = make_pod("p").req(cpu="1").pod().assigned_to("n1")
    cache.assume_pod(pod)
    assert cache.is_assumed(pod.uid)
    assert cache.update_snapshot().req_cpu.tolist() == [1000]

    cache.finish_binding(pod)
    assert cache.is_assumed(pod.uid)
    cache.add_pod(pod)  # the watch event of the bound pod
    assert not cache.is_assumed(pod.uid)
    assert requested_cpu(cache, "n1") == 1000
    assert cache.pod_count() == 1
    assert cache.update_snapshot().req_pods.tolist() == [1]


def test_forget_releases_an_assumed_pod() -> None:
    cache = cache_with(make_node("n1").node())
    pod = make_pod("p").req(cpu="1").pod().assigned_to("n1")
    cache.assume_pod(pod)
    cache.update_snapshot()
    cache.forget_pod(pod)
    assert not cache.is_assumed(pod.uid)
    assert cache.pod_count() == 0
    assert cache.update_snapshot().req_cpu.tolist() == [0]


def test_forget_on_the_wrong_node_raises_and_keeps_the_pod() -> None:
    cache = cache_with(make_node("n1").node(), make_node("n2").node())
    pod = make_pod("p").req(cpu="1").pod()
    cache.assume_pod(pod.assigned_to("n1"))
    with pytest.raises(CacheError, match=r"pod default/p was assumed on n1, not n2"):
        cache.forget_pod(pod.assigned_to("n2"))
    assert requested_cpu(cache, "n1") == 1000


def test_assuming_a_pod_twice_raises() -> None:
    cache = cache_with(make_node("n1").node())
    pod = make_pod("p").pod().assigned_to("n1")
    cache.assume_pod(pod)
    with pytest.raises(CacheError, match="already in the cache"):
        cache.assume_pod(pod)


def test_a_pod_bound_elsewhere_than_assumed_moves_to_where_it_is_bound() -> None:
    cache = cache_with(make_node("n1").node(), make_node("n2").node())
    pod = make_pod("p").req(cpu="1").pod()
    cache.assume_pod(pod.assigned_to("n1"))
    cache.add_pod(pod.assigned_to("n2"))
    assert (requested_cpu(cache, "n1"), requested_cpu(cache, "n2")) == (0, 1000)
    assert not cache.is_assumed(pod.uid)


def test_update_and_remove_of_a_bound_pod() -> None:
    cache = cache_with(make_node("n1").node())
    raw = make_pod("p").req(cpu="1").node("n1").obj()
    cache.add_pod(Pod(raw))
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    cache.update_pod(None, Pod(raw))
    assert requested_cpu(cache, "n1") == 2000
    cache.remove_pod(Pod(raw))
    assert requested_cpu(cache, "n1") == 0
    assert cache.dump() == {"n1": []}


# -- node tree -----------------------------------------------------------------------------------
def zoned(name: str, zone: str = "", region: str = "") -> Node:
    b = make_node(name)
    if zone:
        b.zone(zone)
    if region:
        b.label("topology.kubernetes.io/region", region)
    return b.node()


TREE_CASES: list[tuple[str, list[Node], list[str]]] = [
    ("no-zones-keeps-insertion-order", [zoned("a"), zoned("b"), zoned("c")], ["a", "b", "c"]),
    (
        "round-robin-over-zones-in-first-seen-order",
        [
            zoned("a1", "A"),
            zoned("b1", "B"),
            zoned("a2", "A"),
            zoned("c1", "C"),
            zoned("a3", "A"),
            zoned("c2", "C"),
        ],
        ["a1", "b1", "c1", "a2", "c2", "a3"],
    ),
    (
        "unzoned-nodes-form-their-own-zone",
        [zoned("x1"), zoned("a1", "A"), zoned("x2"), zoned("a2", "A")],
        ["x1", "a1", "x2", "a2"],
    ),
    (
        "same-zone-name-in-two-regions-is-two-zones",
        [zoned("e1", "z1", "eu"), zoned("e2", "z1", "eu"), zoned("u1", "z1", "us")],
        ["e1", "u1", "e2"],
    ),
]


@pytest.mark.parametrize(
    ("nodes", "order"), [c[1:] for c in TREE_CASES], ids=[c[0] for c in TREE_CASES]
)
def test_node_tree_interleaves_zones(nodes: list[Node], order: list[str]) -> None:
    cache = cache_with(*nodes)
    assert cache.node_tree_order() == order
    assert [ni.name for ni in cache.update_snapshot().node_infos] == order


def test_node_tree_after_remove_and_zone_change() -> None:
    cache = cache_with(zoned("a1", "A"), zoned("b1", "B"), zoned("a2", "A"), zoned("b2", "B"))
    cache.remove_node("a1")
    assert cache.node_tree_order() == ["a2", "b1", "b2"]
    cache.update_node(None, zoned("b1", "A"))
    assert cache.node_tree_order() == ["a2", "b2", "b1"]
    assert [ni.name for ni in cache.update_snapshot().node_infos] == ["a2", "b2", "b1"]


# -- incremental snapshot ----------------------------------------------------------------------------
class Spy:
    """Records which rows the cache refreshes and whether it rebuilds."""

    def __init__(self, snap: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
        self.refreshed: list[str] = []
        self.rebuilds = 0
        refresh, rebuild = snap.refresh_row, snap.rebuild

        def spy_refresh(ni: Any) -> None:
            self.refreshed.append(ni.name)
            refresh(ni)

        def spy_rebuild(infos: Any) -> None:
            self.rebuilds += 1
            rebuild(infos)

        monkeypatch.setattr(snap, "refresh_row", spy_refresh)
        monkeypatch.setattr(snap, "rebuild", spy_rebuild)

    def reset(self) -> None:
        self.refreshed.clear()
        self.rebuilds = 0


def test_update_snapshot_refreshes_only_changed_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = cache_with(*(make_node(f"n{i}").node() for i in range(4)))
    snap = cache.update_snapshot()
    spy = Spy(snap, monkeypatch)
    generation = snap.generation

    cache.add_pod(make_pod("p").req(cpu="500m", **{"example.com/dongle": "1"}).node("n2").pod())
    cache.update_node(None, make_node("n3").alloc(cpu="16").taint("t").node())
    assert cache.update_snapshot() is snap
    assert sorted(spy.refreshed) == ["n2", "n3"] and spy.rebuilds == 0
    assert snap.generation == generation + 1
    assert snap.req_cpu.tolist() == [0, 0, 500, 0]
    assert snap.alloc_cpu.tolist() == [4000, 4000, 4000, 16000]
    assert_same_as_fresh(snap)

    spy.reset()
    cache.update_snapshot()
    assert spy.refreshed == [] and spy.rebuilds == 0


@pytest.mark.parametrize("change", ["add-node", "remove-node"])
def test_update_snapshot_rebuilds_on_node_add_or_remove(
    change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = cache_with(make_node("n1").node(), make_node("n2").node())
    cache.add_pod(make_pod("p").req(cpu="1").node("n2").pod())
    snap = cache.update_snapshot()
    spy = Spy(snap, monkeypatch)
    if change == "add-node":
        cache.add_node(make_node("n3").alloc(cpu="8", **{"nvidia.com/gpu": "1"}).node())
        names = ["n1", "n2", "n3"]
    else:
        cache.remove_node("n1")
        names = ["n2"]
    cache.update_snapshot()
    assert spy.rebuilds == 1
    assert [ni.name for ni in snap.node_infos] == names
    assert snap.req_cpu.tolist()[names.index("n2")] == 1000
    assert_same_as_fresh(snap)


def test_a_removed_node_keeps_its_pods_aggregates_until_they_leave() -> None:
    cache = cache_with(make_node("n1").node(), make_node("n2").node())
    pod = make_pod("p").req(cpu="1").node("n1").pod()
    cache.add_pod(pod)
    cache.remove_node("n1")
    assert cache.node_count() == 1
    assert [ni.name for ni in cache.update_snapshot().node_infos] == ["n2"]
    ni = cache.node_info("n1")
    assert ni is not None and ni.node is None and ni.requested.milli_cpu == 1000

    # The node comes back before its pod leaves: the pod still counts there.
    cache.add_node(make_node("n1").node())
    snap = cache.update_snapshot()
    assert [ni.name for ni in snap.node_infos] == ["n2", "n1"]
    assert snap.req_cpu.tolist() == [0, 1000]

    cache.remove_node("n1")
    cache.remove_pod(pod)
    assert cache.node_info("n1") is None
    assert cache.dump() == {"n2": []}


def test_a_pod_arriving_before_its_node_counts_once_the_node_arrives() -> None:
    cache = Cache()
    cache.add_pod(make_pod("p").req(cpu="1").node("late").pod())
    assert cache.node_count() == 0 and len(cache.update_snapshot()) == 0
    cache.add_node(make_node("late").node())
    snap = cache.update_snapshot()
    assert snap.req_cpu.tolist() == [1000]
    ni = cache.node_info("late")
    assert ni is not None and ni.requested == Resource(milli_cpu=1000, allowed_pods=1)


# -- images --------------------------------------------------------------------------------------------
def num_nodes(cache: Cache, node: str, image: str) -> int:
    ni = cache.node_info(node)
    assert ni is not None
    return ni.image_states[image].num_nodes


def test_image_states_count_the_nodes_holding_each_image() -> None:
    cache = cache_with(
        make_node("n1").image("nginx:1", 100).image("redis:7", 50).node(),
        make_node("n2").image("nginx:1", 100).node(),
    )
    assert num_nodes(cache, "n1", "nginx:1") == 2
    assert num_nodes(cache, "n2", "nginx:1") == 2
    assert num_nodes(cache, "n1", "redis:7") == 1
    ni = cache.node_info("n1")
    assert ni is not None and ni.image_states["nginx:1"].size == 100

    cache.add_node(make_node("n3").image("redis:7", 50).node())
    assert num_nodes(cache, "n1", "redis:7") == 2

    cache.remove_node("n2")
    assert num_nodes(cache, "n1", "nginx:1") == 1

    # n1 drops nginx: it leaves n1's states; redis is still on n1 and n3.
    cache.update_node(None, make_node("n1").image("redis:7", 50).node())
    ni = cache.node_info("n1")
    assert ni is not None and "nginx:1" not in ni.image_states
    assert num_nodes(cache, "n3", "redis:7") == 2


def size(cache: Cache, node: str, image: str) -> int:
    ni = cache.node_info(node)
    assert ni is not None
    return ni.image_states[image].size


def test_an_image_scores_with_the_size_its_first_node_reported() -> None:
    """kube-scheduler's cache keeps one size per image name, the first holder's, until no
    node holds the image: a node reporting another size scores with that one (which
    moves ImageLocality's choice between two nodes holding the image)."""
    cache = cache_with(
        make_node("n1").image("app:v1", 900).node(),
        make_node("n2").image("app:v1", 50).node(),
    )
    assert size(cache, "n1", "app:v1") == size(cache, "n2", "app:v1") == 900
    cache.remove_node("n1")
    assert size(cache, "n2", "app:v1") == 900  # still held: the entry stays
    cache.update_node(None, make_node("n2").image("app:v1", 50).node())
    assert size(cache, "n2", "app:v1") == 50  # n2 alone: re-entered with its own size
