"""The nominator keeps, drops and moves nominations as kube-scheduler's does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.backend.nominator import Nominator
from kubesched.framework.types import Pod
from tests.builders import make_pod


def _pod(nominated: str = "", node: str = "") -> Pod:
    b = make_pod("p").uid("u1")
    if nominated:
        b = b.nominated(nominated)
    if node:
        b = b.node(node)
    return b.pod()


def test_update_without_the_field_keeps_an_in_memory_nomination() -> None:
    nom = Nominator()
    nom.add(_pod(), "n1")
    nom.update(_pod(), _pod())
    assert nom.nominated_node("u1") == "n1"


def test_update_that_removes_the_field_drops_the_nomination() -> None:
    """Preemption clears lower-priority pods' nominatedNodeName; they lose their room."""
    nom = Nominator()
    nom.add(_pod("n1"))
    nom.update(_pod("n1"), _pod())
    assert nom.nominated_node("u1") == ""
    assert nom.nominated_pods_for_node("n1") == []


def test_update_to_another_node_moves_it() -> None:
    nom = Nominator()
    nom.add(_pod("n1"))
    nom.update(_pod("n1"), _pod("n2"))
    assert [p.uid for p in nom.nominated_pods_for_node("n2")] == ["u1"]


def test_assigned_pod_loses_its_nomination() -> None:
    nom = Nominator()
    nom.add(_pod(), "n1")
    nom.update(_pod(), _pod(node="n1"))
    assert nom.nominated_node("u1") == ""


NODES = ("n1", "n2", "n3")
UIDS = ("u1", "u2", "u3", "u4", "u5")
# (uid, node or "" to withdraw, priority)
_steps = st.lists(
    st.tuples(st.sampled_from(UIDS), st.sampled_from(("", *NODES)), st.integers(0, 3)),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(steps=_steps, priority=st.integers(0, 3), uid=st.sampled_from(("u1", "other")))
def test_nodes_a_pod_must_leave_room_on_are_those_with_another_pod_at_its_priority_or_above(
    steps: list[tuple[str, str, int]], priority: int, uid: str
) -> None:
    """Asked between random nominations, moves and withdrawals: the nodes where some pod
    other than the asking one is nominated at its priority or above, no more, no less."""
    nom = Nominator()
    for i, (who, node, prio) in enumerate(steps):
        pod = make_pod(who).uid(who).priority(prio).pod()
        if node:
            nom.add(pod, node)
        else:
            nom.delete(pod)
        if i % 3 == 0:  # asked in between too: what it keeps between asks stays right
            nom.nodes_for(priority, uid)
    expected = {
        n
        for n in nom.nodes()
        if any(p.priority >= priority and p.uid != uid for p in nom.nominated_pods_for_node(n))
    }
    assert set(nom.nodes_for(priority, uid)) == expected
