"""Why a pod is pending: every node's verdict, and the scores of the nodes that fit.

kube-scheduler only reports an aggregate (``0/3 nodes are available: 1 Insufficient
cpu, ...``). :func:`explain` runs the profile's PreFilter, then every Filter plugin in
order on *every* node (with nominated pods, as the scheduler does, so the first failing
plugin is the one kube-scheduler would report), then PreScore and Score on all feasible
nodes, and returns each node's rejecting plugin and reasons, or its weighted score per
plugin and total, best first.

Differences from a scheduling cycle, on purpose: every node is examined (no
``percentageOfNodesToScore`` cut-off, no rotating start), scores are computed even when
a single node fits, and PostFilter (preemption) is never run -- explaining must not evict
anyone. Explaining writes nothing: a fresh CycleState, a read-only snapshot.

A gang member is evaluated as the whole-group cycle places it (Coscheduling lets it
through, so every node's verdict is the member's own), and :func:`explain_pod` adds its
gang's last group attempt: the gang's reason and, with a topology, every domain tried,
its score or why the gang did not fit there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.filter_phase import go_list
from kubesched.framework.interface import Diagnosis
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling import plugin as cosched
from kubesched.scheduler.algorithm import FitError
from kubesched.scheduler.metrics import status_label

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler

__all__ = ["Explanation", "NodeVerdict", "explain", "explain_pod"]

log = logging.getLogger("kubesched.scheduler.explain")


@dataclass(slots=True)
class NodeVerdict:
    node: str
    feasible: bool
    plugin: str = ""
    """The plugin that rejected the node (PreFilter or the first failing Filter)."""
    code: str = "Success"
    """kube-scheduler's status code name: Unschedulable (preemption may help),
    UnschedulableAndUnresolvable (it cannot), Error, ..."""
    reasons: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    """Score plugin -> weighted, normalized score (feasible nodes only)."""
    total: int = 0

    def to_dict(self) -> dict[str, Any]:
        if self.feasible:
            return {"node": self.node, "feasible": True, "total": self.total, "scores": self.scores}
        return {
            "node": self.node,
            "feasible": False,
            "plugin": self.plugin,
            "code": self.code,
            "reasons": self.reasons,
        }


@dataclass(slots=True)
class Explanation:
    namespace: str
    name: str
    profile: str
    message: str
    """kube-scheduler's summary: ``0/N nodes are available: ...`` when nothing fits."""
    nodes: list[NodeVerdict]
    """Feasible nodes best first (ties by name), then rejected nodes by name."""
    status: str = "Pending"
    """Where the pod stands: Pending, Binding or Scheduled (``node`` set), Unschedulable,
    SchedulerError (its last attempt failed with an error, said first in ``message``),
    Waiting."""
    node: str | None = None
    score_plugins: list[str] = field(default_factory=list)
    """Score plugins in profile order with their weights (``name:weight``)."""
    gang: dict[str, Any] | None = None
    """The pod's gang's last whole-group attempt (``gang_topology.Attempt.to_dict``):
    its message and, with a topology, each domain tried and why it failed."""

    @property
    def feasible(self) -> list[NodeVerdict]:
        return [n for n in self.nodes if n.feasible]

    @property
    def rejected(self) -> list[NodeVerdict]:
        return [n for n in self.nodes if not n.feasible]

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "profile": self.profile,
            "status": self.status,
            "node": self.node,
            "message": self.message,
            "scorePlugins": self.score_plugins,
            "feasible": [n.to_dict() for n in self.feasible],
            "rejected": [n.to_dict() for n in self.rejected],
            **({"podGroup": self.gang} if self.gang is not None else {}),
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Explanation:
        """The inverse of :meth:`to_dict` (``kubesched explain --server`` renders it)."""
        nodes = [
            NodeVerdict(n["node"], True, total=int(n["total"]), scores=dict(n["scores"]))
            for n in doc.get("feasible") or ()
        ] + [
            NodeVerdict(n["node"], False, n["plugin"], n["code"], list(n["reasons"]))
            for n in doc.get("rejected") or ()
        ]
        return cls(
            doc["namespace"],
            doc["name"],
            doc["profile"],
            doc["message"],
            nodes,
            status=doc.get("status") or "Pending",
            node=doc.get("node"),
            score_plugins=list(doc.get("scorePlugins") or ()),
            gang=doc.get("podGroup"),
        )

    def table(self) -> str:
        """A readable rendering: the summary, then feasible and rejected nodes."""
        where = f" on {self.node}" if self.node else ""
        lines = [
            f"Pod {self.namespace}/{self.name} (profile {self.profile}): {self.status}{where}",
            self.message,
        ]
        if self.status == "Scheduled":
            lines.append("(evaluated against the cluster as it is now, without this pod)")
        lines += _gang_lines(self.gang)
        feasible = self.feasible
        if feasible:
            plugins = [p for p in _score_names(self.score_plugins) if _any_score(feasible, p)]
            header = ["NODE", "TOTAL", *plugins]
            rows = [
                [n.node, str(n.total), *(str(n.scores.get(p, 0)) for p in plugins)]
                for n in feasible
            ]
            lines += ["", f"Feasible nodes ({len(feasible)}), best first:", *_grid(header, rows)]
        rejected = self.rejected
        if rejected:
            header = ["NODE", "PLUGIN", "CODE", "REASON"]
            rows = [[n.node, n.plugin or "-", n.code, "; ".join(n.reasons)] for n in rejected]
            lines += ["", f"Rejected nodes ({len(rejected)}):", *_grid(header, rows)]
        return "\n".join(line.rstrip() for line in lines) + "\n"


def _gang_lines(gang: dict[str, Any] | None) -> list[str]:
    """The gang's last group attempt: its message, and each topology domain tried."""
    if gang is None:
        return []
    lines = ["", f"Pod group {gang['podGroup']}, last group attempt: {gang['message'] or 'placed'}"]
    domains = gang.get("domains") or []
    if domains:
        header = ["DOMAIN", "NODES", "PLACED", "FEASIBLE", "SCORE", "REASON"]
        rows = [
            [
                (d["domain"] or "(spread)") + (" *" if d["chosen"] else ""),
                "-" if d["nodes"] is None else str(d["nodes"]),
                str(d["placed"]),
                "yes" if d["feasible"] else "no",
                "-" if d["score"] is None else str(d["score"]),
                "" if d["feasible"] else _after_key(d["message"]),
            ]
            for d in domains
        ]
        lines += [
            f'Domains of "{gang["topologyKey"]}" tried ({gang["mode"]}; * chosen):',
            *_grid(header, rows),
        ]
    return lines


def _after_key(message: str) -> str:
    """A trial's message without its ``pod group "ns/name": `` prefix."""
    head, sep, rest = message.partition('": ')
    return rest if sep and head.startswith("pod group ") else message


def _score_names(score_plugins: Sequence[str]) -> list[str]:
    return [s.rsplit(":", 1)[0] for s in score_plugins]


def _any_score(nodes: Sequence[NodeVerdict], plugin: str) -> bool:
    return any(plugin in n.scores for n in nodes)


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header) - 1)]
    return [
        "   ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "   " + r[-1]
        for r in table
    ]


def explain(fwk: Framework, pod: Pod, snapshot: Snapshot) -> Explanation:
    """Evaluate ``pod`` against every node of ``snapshot`` with ``fwk``'s plugins."""
    state = CycleState()
    infos = snapshot.node_infos
    verdicts: dict[str, NodeVerdict] = {}
    diagnosis = Diagnosis()
    score_plugins = [f"{p.name}:{w}" for p, w in fwk.chain.score]

    def reject(name: str, st: Status, ni: NodeInfo | None = None) -> None:
        reasons = list(st.reasons) or [st.message()]
        if ni is not None:
            reasons += _details(fwk, state, pod, ni, st)
        verdicts[name] = NodeVerdict(name, False, st.plugin, status_label(st), reasons)
        diagnosis.node_to_status[name] = st

    if _gang_key(fwk, pod) is not None:
        # As the whole-group cycle places it: Coscheduling lets the member through.
        state.write(cosched.GROUP_CYCLE_KEY, cosched.GroupMark())
    pre_res, s, narrowing = fwk.run_pre_filter(state, pod, infos)
    feasible: list[int] = []
    if s is not None:
        diagnosis.pre_filter_msg = s.message()
        for ni in infos:
            reject(ni.name, s)
    else:
        allowed = None if pre_res is None else pre_res.node_names
        absent = Status.unresolvable(
            f"node(s) didn't satisfy plugin(s) {go_list(sorted(narrowing))}",
            plugin=",".join(sorted(narrowing)),
        )
        for ni in infos:
            if allowed is not None and ni.name not in allowed:
                reject(ni.name, absent)
                continue
            st = fwk.run_filter_plugins_with_nominated_pods(state, pod, ni)
            if st is None:
                feasible.append(ni.index)
            else:
                reject(ni.name, st, ni)
    message = ""
    if feasible:
        rows = np.array(feasible, dtype=np.intp)
        s = fwk.run_pre_score(state, pod, [infos[r] for r in feasible])
        per_plugin: dict[str, Any] = {}
        total: Any = np.zeros(len(rows), dtype=np.int64)
        if s is None:
            total, per_plugin, s = fwk.run_score(state, pod, snapshot, rows)
        for j, r in enumerate(feasible):
            name = infos[r].name
            verdicts[name] = NodeVerdict(
                name,
                True,
                total=int(total[j]),
                scores={p: int(v[j]) for p, v in per_plugin.items()},
            )
        message = f"{len(feasible)}/{len(infos)} nodes are available"
        if s is not None:
            message += f"; scoring failed: {s.message()}"
        else:
            best = max(verdicts[infos[r].name].total for r in feasible)
            tops = sorted(infos[r].name for r in feasible if verdicts[infos[r].name].total == best)
            message += f"; best: {', '.join(tops)} (score {best})"
    elif infos:
        message = str(FitError(pod, len(infos), diagnosis))
    else:
        message = "no nodes available to schedule pods"  # kube's ErrNoNodesAvailable
    ordered = sorted(
        verdicts.values(), key=lambda v: (not v.feasible, -v.total if v.feasible else 0, v.node)
    )
    return Explanation(
        pod.namespace, pod.name, fwk.profile_name, message, ordered, score_plugins=score_plugins
    )


def _details(fwk: Framework, state: CycleState, pod: Pod, ni: NodeInfo, st: Status) -> list[str]:
    """More lines from the rejecting Filter plugin, when it can say more than its reason
    (``explain_filter(state, pod, node_info)``: DynamicResources, claim by claim)."""
    for p in fwk.chain.filter:
        if p.name == st.plugin:
            hook = getattr(p, "explain_filter", None)
            if callable(hook):
                try:
                    return [str(line) for line in hook(state, pod, ni)]
                except Exception:  # an explanation never breaks explain
                    log.exception("explain_filter of %s failed", p.name)
    return []


def _gang_key(fwk: Framework, pod: Pod) -> str | None:
    for p in fwk.chain.pre_filter:
        key_of = getattr(p, "gang_key", None)
        if p.name == cosched.NAME and key_of is not None:
            key: str | None = key_of(pod)
            return key
    return None


def _with_gang(sched: Scheduler, fwk: Framework, pod: Pod, exp: Explanation) -> Explanation:
    key = _gang_key(fwk, pod)
    attempt = None if key is None else sched.gangs.last.get(key)
    if attempt is not None:
        exp.gang = attempt
    return exp


def explain_pod(sched: Scheduler, pod: Pod) -> Explanation:
    """Explain a pod against a scheduler's current cache, with the pod's own state.

    A pod that is already bound is evaluated as if it were not on its node yet (it is
    taken out of a snapshot for the evaluation and put back)."""
    fwk = sched.framework_for(pod)
    if fwk is None:
        raise LookupError(f"no profile serves schedulerName {pod.scheduler_name!r}")
    cached = sched.cache.get_pod(pod.uid)
    if cached is not None and cached.node_name:
        if sched.cache.is_assumed(pod.uid):
            # Binding in flight: the cache must keep the assumption; nothing to explain.
            exp = explain(fwk, pod, sched.cache.update_snapshot())
            exp.status, exp.node = "Binding", cached.node_name
            return _with_gang(sched, fwk, pod, exp)
        # Plugins read the cache's snapshot through their handle, so the pod leaves the
        # cache itself for the evaluation (synchronously: no cycle can see it).
        sched.cache.remove_pod(cached)
        try:
            exp = explain(fwk, pod.assigned_to(""), sched.cache.update_snapshot())
        finally:
            sched.cache.add_pod(cached)
            sched.cache.update_snapshot()
        exp.status, exp.node = "Scheduled", cached.node_name
        return _with_gang(sched, fwk, pod, exp)
    exp = explain(fwk, pod, sched.cache.update_snapshot())
    outcome = sched.stats.outcomes.get(pod.uid)
    if outcome is not None and outcome.status in ("Unschedulable", "SchedulerError", "Waiting"):
        exp.status = outcome.status
    if outcome is not None and outcome.status == "SchedulerError":
        # an error (a failed API write, a gang's inconsistent spec) is not something the
        # evaluation against the cache can show again: its words first
        exp.message = f"the last attempt failed: {outcome.message}\n{exp.message}"
    q = sched.queues.queue(pod.scheduler_name)
    qpi = q.get(pod.uid) if q is not None else None
    if qpi is not None and qpi.gated:
        exp.status = "Waiting"
        exp.message = (
            f"waiting for PreEnqueue plugin {qpi.gating_plugin}: {qpi.message}; " + exp.message
        )
    return _with_gang(sched, fwk, pod, exp)
