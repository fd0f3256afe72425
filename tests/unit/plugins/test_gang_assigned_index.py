"""Coscheduling's index of the gang members on nodes (``AssignedIndex``), kept across
cycles: after any history of pods assumed, bound and deleted and nodes added, relabelled
and removed, it answers as an index built afresh from the snapshot, and a change to the
node set re-reads only the pods of the nodes that changed."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.backend.cache import Cache
from kubesched.plugins.coscheduling.gangs import AssignedIndex, GangKeys
from tests.builders import make_node
from tests.unit.plugins.coscheduling_fakes import member
from tests.unit.plugins.fakes import FakeStore

GROUPS = ("a", "b")
KEYS = tuple(f"default/{g}" for g in GROUPS)
ZONE = "topology.kubernetes.io/zone"


def fresh_keys() -> GangKeys:
    store = FakeStore()
    return GangKeys(lambda: store)


def answers(index: AssignedIndex, cache: Cache) -> dict[str, set[str]]:
    snap = cache.update_snapshot()
    return {key: set(index.members(snap, key)) for key in KEYS}


ops = st.lists(
    st.one_of(
        st.tuples(st.just("place"), st.integers(0, 9), st.integers(0, 3), st.sampled_from(GROUPS)),
        st.tuples(st.just("delete"), st.integers(0, 9)),
        st.tuples(st.just("node"), st.integers(0, 3), st.sampled_from(("z0", "z1"))),
        st.tuples(st.just("drop_node"), st.integers(0, 3)),
        st.tuples(st.just("cycle")),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_members_kept_across_cycles_equal_a_fresh_index(history: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    for i in range(4):
        cache.add_node(make_node(f"n{i}").label(ZONE, "z0").node())
    kept = AssignedIndex(fresh_keys())
    placed: dict[int, Any] = {}
    for op in [*history, ("cycle",)]:
        if op[0] == "place" and op[1] not in placed:
            p = member(f"p{op[1]}", op[3]).assigned_to(f"n{op[2]}")
            cache.add_pod(p)
            placed[op[1]] = p
        elif op[0] == "delete" and op[1] in placed:
            cache.remove_pod(placed.pop(op[1]))
        elif op[0] == "node":
            new = make_node(f"n{op[1]}").label(ZONE, op[2]).node()
            old = cache.node_info(new.name)
            if old is not None and old.node is not None:
                cache.update_node(old.node, new)
            else:
                cache.add_node(new)
        elif op[0] == "drop_node":
            cache.remove_node(f"n{op[1]}")
        elif op[0] == "cycle":
            assert answers(kept, cache) == answers(AssignedIndex(fresh_keys()), cache)


def test_a_node_joining_or_leaving_rereads_only_that_nodes_pods() -> None:
    read: list[str] = []
    index = AssignedIndex(fresh_keys())
    original = index._node_members

    def reading(ni: Any) -> Any:
        read.append(ni.name)
        return original(ni)

    index._node_members = reading  # type: ignore[method-assign]
    cache = Cache()
    names: dict[str, str] = {}

    def place(name: str, group: str, node: str) -> None:
        p = member(name, group).assigned_to(node)
        names[p.uid] = name
        cache.add_pod(p)

    def members_of_a() -> set[str]:
        return {names[uid] for uid in answers(index, cache)["default/a"]}

    for i in range(3):
        cache.add_node(make_node(f"n{i}").node())
    for i in range(6):
        place(f"p{i}", GROUPS[i % 2], f"n{i % 3}")
    assert members_of_a() == {"p0", "p2", "p4"}
    assert sorted(read) == ["n0", "n1", "n2"]

    read.clear()
    cache.add_node(make_node("n3").node())
    place("p6", "a", "n3")
    assert members_of_a() == {"p0", "p2", "p4", "p6"}
    assert read == ["n3"]

    # n1 leaves (its pods' deletions come later): its members no longer count
    read.clear()
    cache.remove_node("n1")
    assert members_of_a() == {"p0", "p2", "p6"}
    assert read == []
