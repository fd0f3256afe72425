"""Where a gang goes: the whole cluster, or the best topology domain.

Without ``topology`` the gang is tried once, on every node. With ``topology[0].key``
(upstream's ``schedulingConstraints.topology``, ours with a ``mode``) each domain -- the
nodes sharing one value of that label -- is a candidate placement, as kube-scheduler
1.37's TopologyPlacement generates them (only the domain of members already placed,
when some are). The gang is tried in each (its members narrowed to the domain's nodes,
through the full Filter and Score), the trial reverted, and the feasible placements are
ranked as ``findBestPlacement`` ranks them with 1.37's default placement scorers:
PodGroupPodsCount (members placed, normalized to 0-100 by the best, weight 1) plus
NodeResourcesFit's ScorePlacement (the profile's scoring strategy over the domain's
summed allocatable and requested resources, the gang included, times its Score weight);
ties at random. The best is placed again, for real.

``Required``: no domain holds the gang -> nothing is placed; the message gives the
first domain's reason (``0/3 placements are available, first placement status: ...``,
kube-scheduler's words) and :class:`Attempt` keeps every domain's for ``explain``.
``Preferred``: then each member tries the domains in order of how many members each
held, nodes without the label last, so the gang spreads over as few domains as it can.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.framework.runtime import Framework
from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling import plugin as cosched

if TYPE_CHECKING:
    from kubesched.scheduler.gang_cycle import GangCycle, Member, Trial

__all__ = ["Attempt", "place"]

NO_LABEL = ""
"""The pseudo-domain of nodes without the topology label (a preferred topology only)."""


@dataclass(slots=True)
class Attempt:
    """A group cycle's outcome, kept per gang for ``kubesched explain``."""

    key: str
    topology_key: str
    mode: str
    need: int
    trials: list[Trial] = field(default_factory=list)
    chosen: Trial | None = None
    """The trial whose assumes are live (placed, or to be reverted by the caller)."""
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "podGroup": self.key,
            "topologyKey": self.topology_key,
            "mode": self.mode,
            "message": self.message,
            "domains": [
                {
                    "domain": t.domain,
                    "nodes": None if t.nodes is None else len(t.nodes),
                    "placed": len(t.placed),
                    "feasible": t.ok(self.need),
                    "score": t.score,
                    "chosen": t is self.chosen and t.ok(self.need),
                    "message": t.message,
                }
                for t in self.trials
                if t.domain != "" or self.topology_key
            ],
        }


def place(
    cycle: GangCycle, fwk: Framework, view: cosched.GroupView, members: list[Member], need: int
) -> Attempt:
    from kubesched.scheduler.gang_cycle import Trial

    spec = view.spec
    key = view.key
    if not spec.topology:
        attempt = Attempt(key, "", "", need)
        t = cycle.try_members(fwk, members, need, Trial("", None))
        t.message = _trial_message(key, spec.min_member, view, members, t)
        attempt.trials.append(t)
        attempt.chosen = t
        attempt.message = t.message
        return attempt
    topo = spec.topology[0]
    attempt = Attempt(key, topo.key, topo.mode, need)
    sched = cycle.sched
    snap = sched.cache.update_snapshot()
    domains, unlabeled = _domains(snap.node_infos, topo.key)
    held = _domains_held(sched, view, topo.key)
    if len(held) > 1:
        attempt.message = (
            f'pod group "{key}": members already placed span {len(held)} domains of '
            f'"{topo.key}" ({", ".join(sorted(held))})'
        )
        return attempt
    if held:
        domains = {d: n for d, n in domains.items() if d in held}
    sched.metrics.placements_generated(fwk.profile_name, len(domains))
    for name in sorted(domains):
        t0 = time.perf_counter()
        t = cycle.try_members(fwk, members, need, Trial(name, domains[name]))
        t.message = _trial_message(key, spec.min_member, view, members, t)
        ok = t.ok(need)
        if ok:
            t.score = _placement_score(fwk, [snap.by_name[n] for n in domains[name]])
        cycle.revert(fwk, t)
        attempt.trials.append(t)
        sched.metrics.placement_evaluation(
            "feasible" if ok else "infeasible", fwk.profile_name, time.perf_counter() - t0
        )
        if t.error is not None:
            return attempt
    feasible = [t for t in attempt.trials if t.ok(need)]
    if feasible:
        counts = [len(view.placed) + len(t.placed) for t in feasible]
        most = max(counts)
        for t, c in zip(feasible, counts, strict=True):
            t.score = (t.score or 0) + c * 100 // most
        top = max(t.score or 0 for t in feasible)
        best = [t for t in feasible if t.score == top]
        pick = best[0] if len(best) == 1 else best[sched.algorithm.rng.randrange(len(best))]
        final = cycle.try_members(fwk, members, need, Trial(pick.domain, pick.nodes))
        final.score, final.message = pick.score, pick.message
        attempt.trials[attempt.trials.index(pick)] = final
        attempt.chosen = final
        if not final.ok(need):  # the same snapshot: only a plugin's randomness gets here
            final.message = _trial_message(key, spec.min_member, view, members, final)
        attempt.message = final.message
        return attempt
    first = attempt.trials[0].message if attempt.trials else ""
    failed = (
        f"0/{len(attempt.trials)} placements are available, first placement status: "
        f'{topo.key}="{attempt.trials[0].domain}": {_strip(key, first)}'
        if attempt.trials
        else f'no node has the topology label "{topo.key}"'
    )
    attempt.message = f'pod group "{key}": {failed}'
    if topo.mode != "Preferred" or held:
        return attempt
    # Preferred: as few domains as possible, the ones that held most members first.
    order = sorted(attempt.trials, key=lambda t: (-len(t.placed), t.domain))
    choices = [t.nodes for t in order if t.nodes]
    if unlabeled:
        choices.append(unlabeled)
    spread = cycle.try_members(fwk, members, need, Trial(NO_LABEL, None), domains=choices)
    spread.message = _trial_message(key, spec.min_member, view, members, spread)
    attempt.trials.append(spread)
    attempt.chosen = spread
    if not spread.ok(need):
        attempt.message = spread.message
    return attempt


def _domains(infos: Sequence[Any], label: str) -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    out: dict[str, set[str]] = {}
    unlabeled: set[str] = set()
    for ni in infos:
        node = ni.node
        value = None if node is None else node.labels.get(label)
        if value is None:
            unlabeled.add(ni.name)
        else:
            out.setdefault(value, set()).add(ni.name)
    return {d: frozenset(n) for d, n in out.items()}, frozenset(unlabeled)


def _domains_held(sched: Any, view: cosched.GroupView, label: str) -> set[str]:
    """The domains of the members already bound or assumed (kube: the required domain)."""
    held: set[str] = set()
    for uid in view.placed:
        pod: Pod | None = sched.cache.get_pod(uid)
        ni = None if pod is None else sched.cache.node_info(pod.node_name)
        if ni is not None and ni.node is not None and label in ni.node.labels:
            held.add(ni.node.labels[label])
    return held


def _placement_score(fwk: Framework, nodes: Sequence[Any]) -> int:
    """NodeResourcesFit's ScorePlacement times its Score weight (0 without it)."""
    for plugin, weight in fwk.chain.score:
        scorer = getattr(plugin, "score_placement", None)
        if scorer is not None:
            return int(scorer(nodes)) * int(weight)
    return 0


def _trial_message(
    key: str, min_member: int, view: cosched.GroupView, members: list[Member], t: Trial
) -> str:
    if t.error is not None:
        return f'pod group "{key}": {t.error.message()}'
    fit = len(view.placed) + len(t.placed)
    unplaced = len(members) - len(t.placed)
    reason = next((m.error for m in t.failed if m.error), "")
    if fit >= min_member:
        return f'pod group "{key}": {fit}/{min_member} members fit'
    pods = "1 pod" if unplaced == 1 else f"{unplaced} pods"
    return f'pod group "{key}": {fit}/{min_member} members fit; {pods}: ' + (
        reason or "not tried: the minimum was out of reach"
    )


def _strip(key: str, message: str) -> str:
    prefix = f'pod group "{key}": '
    return message[len(prefix) :] if message.startswith(prefix) else message
