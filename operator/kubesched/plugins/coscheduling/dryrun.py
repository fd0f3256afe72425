"""The gang dry run: can every member that still needs a node get one, all at once?

Members are placed one after another on copies of the snapshot's NodeInfos (a node
is cloned the first time a member lands on it), through the profile's own filters
(``run_filter_plugins_with_nominated_pods``, so nominated pods are respected) with each
member's PreFilter state, and PreFilter ``add_pod`` extensions told about every member
placed before. Members with the same template (namespace, labels, spec) share one
PreFilter state, so a gang of identical workers costs one PreFilter run, and each
template scans nodes from where its last member landed (first fit, wrapping around,
so a member is declared unplaceable only after every node said no).

First fit is a heuristic for a bin-packing question: it can say "fits" where the real
scheduler, scoring nodes differently, later finds no room for a member. Permit is the
safety net then: nothing is bound until minMember members are reserved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

__all__ = ["DRY_RUN_KEY", "DryRunResult", "dry_run"]

DRY_RUN_KEY = "Coscheduling/dry-run"
"""Written in the member states of a dry run: Coscheduling's own PreFilter passes."""


@dataclass(slots=True)
class DryRunResult:
    placed: int
    """Members the dry run found a node for (in order, until the first that found none)."""
    unplaced: int
    reasons: list[str] = field(default_factory=list)
    """Why the first unplaced member fits nowhere: distinct reasons, most frequent first."""
    placements: dict[str, str] = field(default_factory=dict)
    """Member uid -> node, for the members placed."""

    @property
    def ok(self) -> bool:
        return self.unplaced == 0


@dataclass(slots=True)
class _Template:
    rep: Pod
    """The first member with this template (whose PreFilter state this is)."""
    state: CycleState | None
    allowed: set[str] | None
    status: Status | None
    cursor: int = 0


def _template_key(pod: Pod) -> bytes:
    return orjson.dumps(
        (pod.namespace, pod.labels, pod.spec), option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    )


def dry_run(handle: Handle, snap: Snapshot, members: Sequence[Pod]) -> DryRunResult:
    """Place ``members`` in order on copies of ``snap``; see the module docstring."""
    infos = snap.node_infos
    n = len(infos)
    clones: dict[int, NodeInfo] = {}
    templates: dict[bytes, _Template] = {}
    placed: list[tuple[Pod, NodeInfo]] = []
    result = DryRunResult(0, 0)
    for i, pod in enumerate(members):
        tkey = _template_key(pod)
        t = templates.get(tkey)
        if t is None:
            state = CycleState()
            state.write(DRY_RUN_KEY, True)
            pre, s, _ = handle.run_pre_filter(state, pod, infos)
            if s is not None and s.code == Code.ERROR:
                raise _DryRunError(s)
            t = _Template(
                pod,
                state if s is None else None,
                None if pre is None or pre.node_names is None else set(pre.node_names),
                s,
            )
            templates[tkey] = t
            # Tell the new state about the members already placed.
            for other, ni in placed:
                if t.state is not None:
                    handle.run_pre_filter_extension_add_pod(t.state, pod, other, ni)
        if t.state is None:
            result.unplaced = len(members) - i
            result.reasons = [t.status.message()] if t.status is not None else []
            return result
        statuses: dict[str, tuple[str, ...]] = {}
        found = -1
        for step in range(n):
            row = (t.cursor + step) % n
            ni = clones.get(row) or infos[row]
            if t.allowed is not None and ni.name not in t.allowed:
                statuses[ni.name] = ("node(s) didn't satisfy PreFilter",)
                continue
            st = handle.run_filter_plugins_with_nominated_pods(t.state, pod, ni)
            if st is None:
                found = row
                break
            if st.code == Code.ERROR:
                raise _DryRunError(st)
            statuses[ni.name] = st.reasons
        if found < 0:
            result.unplaced = len(members) - i
            result.reasons = _reasons(statuses)
            return result
        t.cursor = found
        target = clones.get(found)
        if target is None:
            target = clones[found] = infos[found].clone()
        assumed = pod.assigned_to(target.name)
        target.add_pod(assumed)
        placed.append((assumed, target))
        result.placed += 1
        result.placements[pod.uid] = target.name
        for other_t in templates.values():
            if other_t.state is not None:
                handle.run_pre_filter_extension_add_pod(other_t.state, other_t.rep, assumed, target)
    return result


def _reasons(statuses: dict[str, tuple[str, ...]]) -> list[str]:
    counts: dict[str, int] = {}
    for reasons in statuses.values():
        for r in reasons:
            counts[r] = counts.get(r, 0) + 1
    return sorted(counts, key=lambda r: (-counts[r], r))


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


DryRunError = _DryRunError
