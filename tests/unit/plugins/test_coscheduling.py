"""Coscheduling's extension points, called directly (no scheduler, no queue).

What a user notices: which members are held back and with which message, which are let
through, which are activated when their gang completes, and that no member ever waits
at Permit holding a node (kubesched places a gang's minimum in one whole-group cycle,
where scheduler-plugins parks members at Permit until ``minMember`` are reserved).
"""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from kubesched.api.gangs import WORKLOAD_STORE_KIND, GangAPI
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, EventResource, PreFilterResult
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.status import Code
from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling import NAME, Args
from kubesched.plugins.coscheduling.plugin import GROUP_CYCLE_KEY, GroupMark
from tests.builders import make_node, make_pod
from tests.unit.plugins.coscheduling_fakes import member, plugin, pod_group

MISSING = 'pod group "default/pg" does not exist; waiting for it to be created'


def below(placed: int, need: int, key: str = "default/pg") -> str:
    return (
        f'pod group "{key}": {placed}/{need} members placed; '
        "the others are scheduled together, as a group"
    )


def group_cycle(nodes: frozenset[str] | None = None) -> CycleState:
    state = CycleState()
    state.write(GROUP_CYCLE_KEY, GroupMark(nodes))
    return state


# -- PreEnqueue -------------------------------------------------------------------------------
def test_a_pod_in_no_gang_passes_every_extension_point() -> None:
    cs, _ = plugin()
    pod = make_pod("loner").pod()
    assert cs.pre_enqueue(pod) is None
    assert cs.pre_filter(CycleState(), pod, []) == (None, None)
    assert cs.permit(CycleState(), pod, "n1") == (None, 0.0)


def test_members_are_held_until_min_member_exist_then_the_last_releases_the_others() -> None:
    cs, h = plugin(pod_group("pg", 3))
    a, b, c = h.add(member("a", "pg"), member("b", "pg"), member("c", "pg"))
    held = 'pod group "default/pg" needs 3 member pods; waiting for the rest to be created'
    for pod in (a, b):
        st = cs.pre_enqueue(pod)
        assert st is not None
        assert (st.code, st.message(), st.plugin) == (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            held,
            NAME,
        )
    assert h.activated == []
    assert cs.pre_enqueue(c) is None
    assert h.activated == [["a", "b"]]  # the held members go to activeQ with it
    # Activated members pass without activating the gang again (no endless release).
    assert cs.pre_enqueue(a) is None
    assert cs.pre_enqueue(b) is None
    assert h.activated == [["a", "b"]]


def test_a_pod_that_moves_to_another_gang_is_held_by_the_new_one() -> None:
    # Each version of a pod is a new view; the gang a view names is looked up once per
    # view (PreEnqueue, QueueSort and the index all ask), never carried to the next.
    cs, h = plugin(pod_group("pg", 1), pod_group("big", 3))
    (first,) = h.add(member("a", "pg"))
    assert cs.pre_enqueue(first) is None
    (moved,) = h.add(member("a", "big"))
    st = cs.pre_enqueue(moved)
    assert st is not None
    assert st.message() == (
        'pod group "default/big" needs 3 member pods; waiting for the rest to be created'
    )
    assert cs.pre_enqueue(first) is None  # the older view still names its own gang
    assert cs.pre_enqueue(make_pod("a").pod()) is None  # and a view naming none, none


def test_a_gang_of_one_is_let_through_and_the_message_says_one_member_pod() -> None:
    cs, h = plugin(pod_group("pg", 2))
    (a,) = h.add(member("a", "pg"))
    st = cs.pre_enqueue(a)
    assert st is not None and "needs 2 member pods" in st.message()
    cs1, h1 = plugin(pod_group("solo", 1))
    assert cs1.pre_enqueue(h1.add(member("s", "solo"))[0]) is None


def test_members_already_bound_count_towards_min_member() -> None:
    cs, h = plugin(pod_group("pg", 3))
    h.bind("n1", member("a", "pg"), member("b", "pg"))
    (c,) = h.add(member("c", "pg"))
    assert cs.pre_enqueue(c) is None


def test_a_member_whose_sibling_was_deleted_is_held_again() -> None:
    cs, h = plugin(pod_group("pg", 2))
    a, b = h.add(member("a", "pg"), member("b", "pg"))
    assert cs.pre_enqueue(a) is not None
    del h.pods[a.uid]  # deleted while held: the scheduler no longer knows it
    st = cs.pre_enqueue(b)
    assert st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert h.activated == []


@pytest.mark.parametrize(
    ("api", "group", "need"),
    [
        pytest.param(GangAPI.SCHEDULER_PLUGINS, pod_group("pg", 0, GangAPI.SCHEDULER_PLUGINS), 1,
                     id="scheduler-plugins-minMember-0-gates-nothing"),
        pytest.param(GangAPI.SCHEDULER_PLUGINS, pod_group("pg", 2, GangAPI.SCHEDULER_PLUGINS), 2,
                     id="scheduler-plugins-minMember-2"),
        pytest.param(GangAPI.UPSTREAM, pod_group("pg", None, GangAPI.UPSTREAM), 1,
                     id="kubernetes-basic-policy"),
        pytest.param(GangAPI.UPSTREAM, pod_group("pg", 2, GangAPI.UPSTREAM), 2,
                     id="kubernetes-gang-minCount-2"),
    ],
)  # fmt: skip
def test_min_member_of_each_api(api: GangAPI, group: dict[str, object], need: int) -> None:
    cs, h = plugin(group)
    a, b = h.add(member("a", "pg", api), member("b", "pg", api))
    first = cs.pre_enqueue(a)
    assert (first is None) == (need == 1)
    if first is not None:
        assert f'pod group "{api.group}/default/pg" needs 2 member pods' in first.message()
    assert cs.pre_enqueue(b) is None


async def test_a_member_of_a_missing_pod_group_is_held_with_one_event_per_pod() -> None:
    cs, h = plugin()
    a, b = h.add(member("a", "pg"), member("b", "pg"))
    for pod in (a, a, b):
        st = cs.pre_enqueue(pod)
        assert st is not None
        assert (st.code, st.message()) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MISSING)
    await asyncio.sleep(0)  # the events are sent from tasks
    assert h.cluster.events == [
        ("a", "FailedScheduling", MISSING),
        ("b", "FailedScheduling", MISSING),
    ]


async def test_a_member_of_an_invalid_pod_group_is_held_saying_which_field() -> None:
    cs, h = plugin(pod_group("pg", 0))  # ours requires minMember >= 1
    (a,) = h.add(member("a", "pg"))
    st = cs.pre_enqueue(a)
    assert st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message().startswith("PodGroup default/pg is invalid: spec.minMember")
    await asyncio.sleep(0)
    assert h.cluster.events == [("a", "FailedScheduling", st.message())]


def test_a_deleted_pod_group_holds_its_members_until_it_is_back() -> None:
    cs, h = plugin(pod_group("pg", 1))
    (a,) = h.add(member("a", "pg"))
    assert cs.pre_enqueue(a) is None
    h.objects.objects.clear()
    assert cs.pod_group_deleted("default", "pg") == 0  # nothing waits, nothing rejected
    st = cs.pre_enqueue(a)
    assert st is not None and st.message() == MISSING
    h.objects.add(pod_group("pg", 1))
    assert cs.pre_enqueue(a) is None
    assert h.rejected == []


def test_a_deleted_pod_group_whose_members_are_gone_is_forgotten() -> None:
    cs, h = plugin(pod_group("pg", 2))
    (a,) = h.add(member("a", "pg"))
    cs.pre_enqueue(a)
    cs.group_failed("default/pg", "0/3 nodes are available")
    h.objects.objects.clear()
    cs.pod_group_deleted("default", "pg")
    report = cs.report("default", "pg")  # kept while a member is pending
    assert report is not None and report.blocked == "0/3 nodes are available"
    del h.pods[a.uid]
    cs.pod_group_deleted("default", "pg")
    assert cs.report("default", "pg") is None


# -- PreFilter ---------------------------------------------------------------------------------
def test_prefilter_rejects_a_member_of_a_gang_below_its_minimum_outside_a_group_cycle() -> None:
    cs, h = plugin(pod_group("pg", 3))
    h.bind("n1", member("a", "pg"))
    (b,) = h.add(member("b", "pg"))
    result, st = cs.pre_filter(CycleState(), b, h.snapshot.node_infos)
    assert result is None and st is not None
    assert (st.code, st.message()) == (Code.UNSCHEDULABLE, below(1, 3))


@pytest.mark.parametrize(
    ("nodes", "expected"),
    [(None, None), (frozenset({"n2", "n3"}), PreFilterResult({"n2", "n3"}))],
    ids=["any-node", "the-domain-being-tried"],
)
def test_prefilter_passes_a_member_of_a_group_cycle(
    nodes: frozenset[str] | None, expected: PreFilterResult | None
) -> None:
    cs, h = plugin(pod_group("pg", 3))
    (a,) = h.add(member("a", "pg"))
    assert cs.pre_filter(group_cycle(nodes), a, []) == (expected, None)


def test_prefilter_says_a_missing_pod_group_is_pending_and_an_invalid_one_why() -> None:
    cs, h = plugin(pod_group("bad", 0))
    missing, bad = h.add(member("a", "pg"), member("b", "bad"))
    _, st = cs.pre_filter(CycleState(), missing, [])
    assert st is not None and (st.code, st.message()) == (Code.PENDING, MISSING)
    _, st = cs.pre_filter(CycleState(), bad, [])
    assert st is not None and st.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "PodGroup default/bad is invalid: spec.minMember" in st.message()


def test_a_spare_member_of_a_gang_holding_its_minimum_may_go_anywhere() -> None:
    cs, h = plugin(pod_group("pg", 2))
    h.bind("n1", member("a", "pg"), member("b", "pg"))
    (c,) = h.add(member("c", "pg"))
    assert cs.pre_filter(CycleState(), c, h.snapshot.node_infos) == (None, None)
    assert cs.group_view(c) is None  # scheduled alone, not by a group cycle


def test_a_spare_member_stays_in_the_required_topology_domain_of_its_gang() -> None:
    topo = {"topology": [{"key": "zone", "mode": "Required"}]}
    cs, h = plugin(pod_group("pg", 2, schedulingConstraints=topo))
    h.bind("a1", member("a", "pg"), member("b", "pg"), zone="a")
    h.bind("a2", zone="a")
    h.bind("b1", zone="b")
    (c,) = h.add(member("c", "pg"))
    result, st = cs.pre_filter(CycleState(), c, h.snapshot.node_infos)
    assert st is None and result == PreFilterResult({"a1", "a2"})


def test_min_resources_is_not_checked_the_members_own_requests_are() -> None:
    """scheduler-plugins' PreFilter rejects a gang whose ``minResources`` the cluster
    lacks; kubesched's PodGroup documents minResources as informational: the group
    cycle places the members' requests instead. A gang at its minimum passes."""
    cs, h = plugin(pod_group("pg", 1, minResources={"cpu": "1000"}))
    (a,) = h.bind("n1", member("a", "pg"))
    assert cs.pre_filter(CycleState(), a, h.snapshot.node_infos) == (None, None)


# -- the whole-group cycle's view ----------------------------------------------------------------
def test_group_view_lists_the_unplaced_siblings_by_name() -> None:
    cs, h = plugin(pod_group("pg", 4))
    (placed,) = h.bind("n1", member("a", "pg"))
    d, c, b = h.add(member("d", "pg"), member("c", "pg"), member("b", "pg"))
    for pod in (d, c):
        cs.pre_enqueue(pod)
    view = cs.group_view(b)
    assert view is not None
    assert (view.key, view.spec.min_member, view.placed) == (
        "default/pg",
        4,
        frozenset({placed.uid}),
    )
    assert [p.name for p in view.others] == ["c", "d"]


# -- Permit / Reserve / Unreserve -------------------------------------------------------------
def test_permit_allows_a_group_cycle_member_at_once_even_with_a_schedule_timeout() -> None:
    cs, h = plugin(pod_group("pg", 3, scheduleTimeoutSeconds=5))
    (a,) = h.add(member("a", "pg"))
    assert cs.permit(group_cycle(), a, "n1") == (None, 0.0)


def test_permit_never_parks_a_member_below_the_minimum() -> None:
    cs, h = plugin(pod_group("pg", 3, scheduleTimeoutSeconds=5))
    h.bind("n1", member("a", "pg"))
    (b,) = h.add(member("b", "pg"))
    st, timeout = cs.permit(CycleState(), b, "n1")
    assert st is not None and timeout == 0.0
    assert (st.code, st.message(), st.plugin) == (Code.UNSCHEDULABLE, below(2, 3), NAME)


def test_permit_allows_the_member_that_brings_the_gang_to_its_minimum() -> None:
    cs, h = plugin(pod_group("pg", 2))
    h.bind("n1", member("a", "pg"))
    (b,) = h.add(member("b", "pg"))
    assert cs.permit(CycleState(), b, "n1") == (None, 0.0)


def test_permit_rejects_a_member_whose_pod_group_went_away_since_prefilter() -> None:
    cs, h = plugin(pod_group("pg", 1))
    (a,) = h.add(member("a", "pg"))
    h.objects.objects.clear()
    st, _ = cs.permit(group_cycle(), a, "n1")
    assert st is not None
    assert (st.code, st.message()) == (Code.UNSCHEDULABLE, 'pod group "default/pg" does not exist')


def test_unreserve_and_postfilter_release_nobody_since_nobody_waits() -> None:
    cs, h = plugin(pod_group("pg", 2))
    a, _ = h.add(member("a", "pg"), member("b", "pg"))
    assert cs.reserve(CycleState(), a, "n1") is None
    cs.unreserve(CycleState(), a, "n1")
    result, st = cs.post_filter(CycleState(), a, {})
    assert result is None and st is not None and st.code is Code.UNSCHEDULABLE
    assert h.rejected == []


# -- QueueSort ---------------------------------------------------------------------------------
def queued(pod: Pod, t: float, seq: int) -> QueuedPodInfo:
    return QueuedPodInfo(pod, timestamp=t, seq=seq)


def test_queue_sort_keeps_a_gang_together_and_a_failed_gang_behind_later_pods() -> None:
    cs, h = plugin(pod_group("pg", 2))
    g1, g2 = member("g1", "pg"), member("g2", "pg")
    loner = make_pod("loner").pod()
    vip = make_pod("vip").priority(100).pod()
    infos = [queued(g2, 3.0, 4), queued(loner, 2.0, 2), queued(g1, 1.0, 1), queued(vip, 5.0, 5)]

    def order() -> list[str]:
        out = list(infos)
        out.sort(key=cs.sort_key)
        return [qi.pod.name for qi in out]

    h.clock = 1.0
    cs.pre_enqueue(h.add(g1)[0])  # the gang's time: when the scheduler first saw it
    # g2, queued after the loner, comes out with g1.
    assert order() == ["vip", "g1", "g2", "loner"]
    h.clock = 10.0
    cs.group_failed("default/pg", "0/3 nodes are available: 3 Insufficient cpu.")
    assert order() == ["vip", "loner", "g1", "g2"]
    report = cs.report("default", "pg")
    assert report is not None and report.blocked.startswith("0/3 nodes are available")
    cs.group_scheduled("default/pg")
    report = cs.report("default", "pg")
    assert report is not None and report.blocked == ""


# -- queueing hints ----------------------------------------------------------------------------
def test_queueing_hints_wake_a_member_only_for_its_own_gang() -> None:
    cs, _ = plugin(pod_group("pg", 2))
    hints = {(e.event.resource, e.event.action): e.hint for e in cs.events_to_register()}
    pod_added = hints[(EventResource.POD, ActionType.ADD)]
    group_changed = hints[(EventResource.POD_GROUP, ActionType.ADD | ActionType.UPDATE)]
    assert pod_added is not None and group_changed is not None
    a = member("a", "pg")
    assert pod_added(a, None, member("b", "pg")) is True
    assert pod_added(a, None, member("c", "other")) is False
    assert pod_added(a, None, make_pod("loner").pod()) is False

    old, new = pod_group("pg", 2), pod_group("pg", 3)
    status_only = {**old, "status": {"phase": "Scheduling"}}
    assert group_changed(a, old, new) is True
    assert group_changed(a, old, status_only) is False  # the operator's status writes
    assert group_changed(a, None, pod_group("other", 2)) is False
    # scheduler-plugins' PodGroup of the same name may take over a label that fell back.
    x = member("x", "pg", GangAPI.SCHEDULER_PLUGINS)
    assert group_changed(x, None, pod_group("pg", 2, GangAPI.SCHEDULER_PLUGINS)) is True
    workload = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                "metadata": {"name": "w", "namespace": "default"}, "spec": {}}  # fmt: skip
    assert WORKLOAD_STORE_KIND.startswith("Workload")
    assert group_changed(member("u", "pg", GangAPI.UPSTREAM), None, workload) is True
    assert group_changed(a, None, workload) is False


def test_node_events_wake_members_and_pod_deletions_always_do() -> None:
    cs, _ = plugin()
    hints = {(e.event.resource, e.event.action): e.hint for e in cs.events_to_register()}
    assert hints[(EventResource.POD, ActionType.DELETE)] is None  # always requeue
    node_hint = next(h for (r, _), h in hints.items() if r is EventResource.NODE)
    assert node_hint is not None
    assert node_hint(member("a", "pg"), None, make_node("n1").node()) is True


# -- Args -------------------------------------------------------------------------------------
def test_scheduler_plugins_args_are_accepted_and_checked() -> None:
    args = Args.model_validate({"permitWaitingTimeSeconds": 30, "podGroupBackoffSeconds": 0})
    assert (args.permit_waiting_time_seconds, args.pod_group_backoff_seconds) == (30, 0)
    with pytest.raises(ValidationError, match="permitWaitingTimeSeconds"):
        Args.model_validate({"permitWaitingTimeSeconds": 0})
    with pytest.raises(ValidationError, match="extra"):
        Args.model_validate({"denyPendingPods": True})
