"""The per-cycle snapshot: one row per node, columns the vector plugins read."""

from __future__ import annotations

from kubesched.framework.snapshot import Snapshot
from tests.builders import make_node, make_pod
from tests.unit.framework.snapshots import assert_same_as_fresh

GPU = "nvidia.com/gpu"


def test_rows_hold_each_nodes_allocatable_requests_and_taints() -> None:
    busy = make_pod("busy").req(cpu="1500m", memory="1Gi").pod()
    idle = make_pod("idle").pod()
    snap = Snapshot(
        [
            make_node("a").alloc(cpu="4", memory="8Gi").info(busy, idle),
            make_node("b").alloc(cpu="2", memory="4Gi", **{GPU: "2"}).taint("x").info(),
            make_node("c").taint("y", effect="PreferNoSchedule").unschedulable().info(),
        ]
    )
    assert len(snap) == 3
    assert snap.alloc_cpu.tolist() == [4000, 2000, 4000]
    assert snap.alloc_pods.tolist() == [110, 110, 110]
    assert snap.req_cpu.tolist() == [1500, 0, 0]
    assert snap.req_mem.tolist() == [2**30, 0, 0]
    assert snap.req_pods.tolist() == [2, 0, 0]
    # The best-effort pod counts 100m / 200Mi for scoring.
    assert snap.nz_cpu.tolist() == [1600, 0, 0]
    assert snap.nz_mem.tolist() == [2**30 + 200 * 2**20, 0, 0]
    assert snap.scalar_allocatable(GPU).tolist() == [0, 2, 0]
    assert snap.scalar_requested(GPU).tolist() == [0, 0, 0]
    assert snap.hard_taints.tolist() == [False, True, False]
    assert snap.soft_taints.tolist() == [False, False, True]
    assert snap.unschedulable.tolist() == [False, False, True]
    assert [snap.by_name[n].index for n in "abc"] == [0, 1, 2]
    b = snap.get("b")
    assert b is not None and b.name == "b"
    assert snap.get("missing") is None


def test_refresh_row_tracks_a_pod_added_to_a_node() -> None:
    a, b = make_node("a").info(), make_node("b").info()
    snap = Snapshot([a, b])
    generation = snap.generation
    b.add_pod(make_pod("p").req(cpu="1", **{GPU: "1"}).pod())
    snap.refresh_row(b)
    assert snap.req_cpu.tolist() == [0, 1000]
    # A scalar resource seen for the first time gets a column, zero on other rows.
    assert snap.scalar_requested(GPU).tolist() == [0, 1]
    assert_same_as_fresh(snap)
    assert snap.generation == generation  # the cache bumps it, not refresh_row


def test_affinity_lists_follow_refreshes() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
        }
    }
    a, b = make_node("a").info(), make_node("b").info()
    snap = Snapshot([a, b])
    assert snap.have_pods_with_affinity() == []
    b.add_pod(make_pod("p").affinity(anti).pod())
    snap.refresh_row(b)
    assert [ni.name for ni in snap.have_pods_with_affinity()] == ["b"]
    assert [ni.name for ni in snap.have_pods_with_required_anti_affinity()] == ["b"]


def test_whether_any_node_holds_affinity_pods_follows_adds_removes_and_rebuilds() -> None:
    """``any_pods_with_*`` (asked every cycle, without listing) say what the lists say
    through pods coming and going, on several nodes, and a rebuild without those nodes."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]
        }
    }
    pref = {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}
            ]
        }
    }
    a, b, c = make_node("a").info(), make_node("b").info(), make_node("c").info()
    snap = Snapshot([a, b, c])

    def agree() -> tuple[bool, bool]:
        any_aff, any_anti = (
            snap.any_pods_with_affinity(),
            snap.any_pods_with_required_anti_affinity(),
        )
        assert any_aff == bool(snap.have_pods_with_affinity())
        assert any_anti == bool(snap.have_pods_with_required_anti_affinity())
        return any_aff, any_anti

    assert agree() == (False, False)
    p_anti, p_pref = make_pod("x").affinity(anti).pod(), make_pod("y").affinity(pref).pod()
    a.add_pod(p_anti)
    snap.refresh_row(a)
    b.add_pod(p_pref)
    snap.refresh_row(b)
    snap.refresh_row(b)  # a refresh that changes nothing counts nothing twice
    assert agree() == (True, True)
    a.remove_pod(p_anti)
    snap.refresh_row(a)
    assert agree() == (True, False)
    a.add_pod(p_anti)
    snap.refresh_row(a)
    snap.rebuild([c, b])  # a's pods left with it
    assert agree() == (True, False)
    b.remove_pod(p_pref)
    snap.refresh_row(b)
    assert agree() == (False, False)


def test_rebuild_reorders_rows() -> None:
    a, b, c = (make_node(n).alloc(cpu=str(i + 1)).info() for i, n in enumerate("abc"))
    snap = Snapshot([a, b, c])
    snap.rebuild([c, a])
    assert [ni.name for ni in snap.node_infos] == ["c", "a"]
    assert snap.alloc_cpu.tolist() == [3000, 1000]
    assert snap.get("b") is None
    assert_same_as_fresh(snap)
