"""The nominator keeps, drops and moves nominations as kube-scheduler's does."""

from __future__ import annotations

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
