"""What each benchmark workload must have done, whichever target ran it (tests only)."""

from __future__ import annotations

#: The smoke size of every workload (measured pods; nodes).
NODES, PODS = 12, 12


def check_workload(name: str, phases: dict[str, dict[str, int]]) -> None:
    """What each workload must have done, beside binding its measured pods."""
    if name == "SchedulingWhileGated":
        assert phases["gated"] == {
            "pods": PODS, "bound": 0, "deleted_by_scheduler": 0, "deleted_by_bench": 0
        }  # fmt: skip
    elif name == "PreemptionBasic":
        init = phases["init"]
        assert init["pods"] == init["bound"] == 4 * NODES
        # 4 x 900m fill a 4-CPU node: a 3000m pod needs three of them gone
        assert init["deleted_by_scheduler"] >= 3 * PODS
        assert phases["measured"]["deleted_by_scheduler"] == 0
    elif name == "Unschedulable":
        bg = phases["background"]
        assert bg["ticks"] >= 2 and bg["pods"] == bg["created"] >= 20
        assert bg["bound"] == 0
    elif name == "MixedChurn":
        bg, init = phases["background"], phases["init"]
        assert bg["ticks"] >= 3
        # per tick: a node and a pod created; the last tick's node and pod, an init pod deleted
        assert bg["created"] == 2 * bg["ticks"]
        assert bg["deleted"] == 3 * bg["ticks"] - 2
        assert init["bound"] == init["pods"] == NODES
        assert init["deleted_by_bench"] == bg["ticks"]
    else:
        assert set(phases) == {"measured"}, phases
