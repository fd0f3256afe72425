"""What DynamicResources keeps from one pod to the next (parsed slices shared between
nodes alike, the answer for nodes alike, the devices claims hold) follows every change
of a slice, a class or a claim: each pod sees the cluster as it is."""

from __future__ import annotations

from typing import Any

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code
from kubesched.plugins import dynamic_resources as dr
from kubesched.plugins.dynamic_resources.state import STATE_KEY
from tests.builders import make_node
from tests.unit.plugins.dra_builders import (
    DraHandle,
    allocated,
    claim,
    device_class,
    gpus,
    pod_with,
)

NODES = [make_node(f"n{i}").info() for i in range(3)]
OK = 'device.attributes["gpu.example.com"].ok'


def setup(*objs: dict[str, Any]) -> tuple[dr.DynamicResources, MemoryCluster]:
    memory = MemoryCluster()
    for o in objs:
        memory.apply(o)
    return dr.new(dr.Args(), DraHandle(Snapshot(NODES), memory)), memory


def devices_per_node(pl: dr.DynamicResources, memory: MemoryCluster, name: str) -> dict[str, Any]:
    """A new claim ``name`` for a new pod: the devices it would get on each node (None:
    the node cannot take it)."""
    memory.apply(claim(name))
    pod = pod_with(name, name=name)
    state = CycleState()
    _, s = pl.pre_filter(state, pod, NODES)
    assert s is None
    out: dict[str, Any] = {}
    for ni in NODES:
        st = pl.filter(state, pod, ni)
        if st is not None:
            assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, st
            out[ni.name] = None
            continue
        data = state.get(STATE_KEY)
        assert data is not None
        results = data.results_for(ni.name)
        assert results is not None
        out[ni.name] = [d.device for r in results for d in r.devices]
    return out


def test_a_changed_slice_or_class_is_seen_by_the_next_pod() -> None:
    pl, memory = setup(device_class("gpu", OK), *(gpus(2, n.name, ok=True) for n in NODES))
    alike = {"n0": ["gpu-0"], "n1": ["gpu-0"], "n2": ["gpu-0"]}
    assert devices_per_node(pl, memory, "a") == alike
    memory.apply(gpus(2, "n1", ok=False))  # n1's devices no longer qualify
    assert devices_per_node(pl, memory, "b") == {**alike, "n1": None}
    memory.apply(device_class("gpu", f"!{OK}"))  # now only n1's do
    assert devices_per_node(pl, memory, "c") == {"n0": None, "n1": ["gpu-0"], "n2": None}
    memory.apply(gpus(2, "n1", ok=True))  # alike again
    memory.apply(device_class("gpu", OK))
    assert devices_per_node(pl, memory, "d") == alike
    memory.delete("ResourceSlice", "n2-gpus")
    assert devices_per_node(pl, memory, "e") == {**alike, "n2": None}


def test_devices_claims_hold_are_counted_in_and_out_as_claims_change() -> None:
    pl, memory = setup(device_class(), *(gpus(2, n.name) for n in NODES))
    memory.apply(allocated(claim("x"), "n0", "gpu-0", reserved="q"))
    memory.apply(allocated(claim("y"), "n1", "gpu-0", "gpu-1", reserved="q"))
    assert devices_per_node(pl, memory, "a") == {"n0": ["gpu-1"], "n1": None, "n2": ["gpu-0"]}
    memory.apply(claim("y"))  # deallocated
    memory.apply(allocated(claim("z"), "n2", "gpu-0", reserved="q"))
    assert devices_per_node(pl, memory, "b") == {
        "n0": ["gpu-1"],
        "n1": ["gpu-0"],
        "n2": ["gpu-1"],
    }
    memory.delete("ResourceClaim", "default/x")
    memory.delete("ResourceClaim", "default/z")
    alike = {"n0": ["gpu-0"], "n1": ["gpu-0"], "n2": ["gpu-0"]}
    assert devices_per_node(pl, memory, "c") == alike
    # The same claims list again: nothing read twice, the same answer.
    assert devices_per_node(pl, memory, "d") == alike


def test_a_malformed_allocated_claim_holds_nothing_and_is_reported_once(caplog: Any) -> None:
    pl, memory = setup(device_class(), gpus(1, "n0"))
    broken = allocated(claim("x"), "n0", "gpu-0", reserved="q")
    broken["status"]["allocation"]["devices"]["results"][0].pop("device")
    memory.apply(broken)
    for name in ("a", "b"):
        assert devices_per_node(pl, memory, name)["n0"] == ["gpu-0"]
    warnings = [r for r in caplog.records if "ResourceClaim default/x ignored" in r.getMessage()]
    assert len(warnings) == 1


def test_our_written_claims_count_while_the_store_lags_behind() -> None:
    pl, memory = setup(device_class(), *(gpus(1, n.name) for n in NODES))
    for i in range(20):  # claims the lagging store still shows unallocated
        memory.apply(claim(f"w{i}"))
    stored = memory.get("ResourceClaim", "default", "w7")
    assert stored is not None
    written = allocated(dict(stored), "n1", "gpu-0", reserved="q")
    rv = str(int(stored["metadata"]["resourceVersion"]) + 1)  # the store's next one
    written["metadata"] = {**stored["metadata"], "resourceVersion": rv}
    pl.tracker.assume(written)
    assert devices_per_node(pl, memory, "a") == {"n0": ["gpu-0"], "n1": None, "n2": ["gpu-0"]}
    memory.apply(claim("w7"))  # the store catches up, past our write: deallocated
    assert devices_per_node(pl, memory, "b")["n1"] == ["gpu-0"]


def test_only_claim_and_pod_group_events_may_let_a_held_pod_pass_pre_enqueue() -> None:
    """PreEnqueue waits for claims (and a pod's PodGroup): a start-up listing of 1000
    slices after 1000 pods waiting for their claims walked every such pod per slice."""
    pl, _ = setup()
    ungating = sorted(r.event.resource.value for r in pl.events_to_register() if r.ungates)
    assert ungating == ["PodGroup", "ResourceClaim"]
