"""The web view's data: plain facts in, the page's JSON out (pure; no scheduler, no I/O).

:mod:`kubesched.ui.collect` reads the facts from a running scheduler (its queues, the
cache dump, Coscheduling's gang reports, the profiles, ``explain``); the functions here
turn them into what the page draws, so what the picture says is unit-tested without a
browser:

- queues: the count per pool (active, backoff, unschedulable, gated) now and over time
  (:class:`QueueHistory`), and the pods of each pool with their last reason;
- gangs: members bound, waiting (exist, not bound) and missing (below minMember), and
  the blocker (why the last group attempt failed, or why the gang is held back);
- profiles: Ready and the plugin chain per extension point;
- a pending pod's explanation (``Explanation.to_dict``) as a node heat map, each cell
  coloured by the plugin that rejected the node (feasible nodes by their score), a legend
  counting nodes per rejecting plugin, and a bar per Score plugin.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FEASIBLE_COLOUR",
    "POOLS",
    "GangFacts",
    "QueueHistory",
    "explain_view",
    "gang_view",
    "gangs_view",
    "plugin_colour",
    "plugin_colours",
    "profile_view",
    "queues_view",
]

POOLS = ("active", "backoff", "unschedulable", "gated")
"""The scheduling queue's pools, in the order a pod moves through them."""

FEASIBLE_COLOUR = "#2e9e5b"

_COLOURS = {
    "NodeResourcesFit": "#d94f4f",
    "NodeAffinity": "#4f7fd9",
    "TaintToleration": "#e08a2c",
    "NodeUnschedulable": "#7d7d7d",
    "NodeName": "#8c5fbf",
    "NodePorts": "#c2569b",
    "PodTopologySpread": "#2aa3a3",
    "InterPodAffinity": "#b8a02a",
    "VolumeBinding": "#6b8e23",
    "VolumeZone": "#a0522d",
    "VolumeRestrictions": "#5f6fbf",
    "NodeVolumeLimits": "#bf5f5f",
    "DynamicResources": "#3f9fd9",
    "Coscheduling": "#9b59b6",
    "SchedulingGates": "#555555",
    "NodeResourcesBalancedAllocation": "#f07575",
    "ImageLocality": "#3f9fd9",
    "DefaultPreemption": "#555555",
    "DefaultBinder": "#9aa3b2",
    "PrioritySort": "#9aa3b2",
}
_SPARE = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#46f0f0", "#f032e6")


def plugin_colour(plugin: str) -> str:
    """One colour per plugin, the same on every page and every run (a stable hash picks
    one for plugins not in the table, e.g. out-of-tree ones)."""
    if plugin in _COLOURS:
        return _COLOURS[plugin]
    first = plugin.split(",", 1)[0]
    if first in _COLOURS:
        return _COLOURS[first]
    digest = hashlib.sha256(plugin.encode()).digest()
    return _SPARE[digest[0] % len(_SPARE)]


def plugin_colours(names: Iterable[str]) -> dict[str, str]:
    """``plugin_colour`` of each name (weights as ``name:weight`` are dropped): the page
    colours chips and bars with it, so one table serves Python and the page."""
    out: dict[str, str] = {}
    for n in names:
        plugin = n.rsplit(":", 1)[0]
        out[plugin] = plugin_colour(plugin)
    return out


# -- queues ---------------------------------------------------------------------------------
class QueueHistory:
    """The pool counts sampled over time (a bounded ring: the page draws the last
    ``size`` samples; older ones are dropped)."""

    def __init__(self, size: int = 240) -> None:
        self._samples: deque[dict[str, float]] = deque(maxlen=size)

    def record(self, t: float, counts: Mapping[str, int]) -> None:
        self._samples.append({"t": t, **{p: float(counts.get(p, 0)) for p in POOLS}})

    def samples(self) -> list[dict[str, float]]:
        return list(self._samples)


def queues_view(pending: Sequence[Mapping[str, Any]], in_flight: int) -> dict[str, Any]:
    """``cache_dump``'s pending pods grouped by pool, with a count per pool."""
    pods: dict[str, list[dict[str, Any]]] = {p: [] for p in POOLS}
    for d in pending:
        pool = str(d.get("pool") or "active")
        pods.setdefault(pool, []).append(
            {
                "pod": str(d["pod"]),
                "profile": str(d.get("profile") or ""),
                "attempts": int(d.get("attempts") or 0),
                "reason": str(d.get("reason") or ""),
                "plugins": [str(p) for p in d.get("unschedulablePlugins") or ()],
            }
        )
    for rows in pods.values():
        rows.sort(key=lambda r: str(r["pod"]))
    counts = {p: len(rows) for p, rows in pods.items()}
    return {"counts": {**counts, "inFlight": in_flight}, "pods": pods}


# -- gangs ----------------------------------------------------------------------------------
@dataclass(slots=True)
class GangFacts:
    key: str
    """``kubesched.api.gangs.gang_key``: the API's group, namespace and name."""
    name: str
    """``namespace/name`` of the PodGroup."""
    api: str
    min_member: int | None
    """None when the PodGroup is missing or invalid (``problem`` says why)."""
    bound: list[str] = field(default_factory=list)
    """Members on a node (bound, or assumed and binding)."""
    waiting: list[str] = field(default_factory=list)
    """Members that exist and are not on a node (queued, or waiting at Permit)."""
    blocker: str = ""
    """Why the last group attempt failed (Coscheduling's report)."""
    problem: str = ""
    """Why the gang is held back before any attempt (its PodGroup is missing, invalid)."""


def gang_view(g: GangFacts) -> dict[str, Any]:
    need = g.min_member
    exist = len(g.bound) + len(g.waiting)
    missing = max(0, need - exist) if need is not None else 0
    if need is not None and len(g.bound) >= need:
        status, blocker = "Scheduled", ""
    elif g.problem:
        status, blocker = "Blocked", g.problem
    elif missing:
        status = "Waiting"
        blocker = g.blocker or f"{missing} of minMember {need} member(s) do not exist yet"
    elif g.blocker:
        status, blocker = "Blocked", g.blocker
    else:
        status, blocker = "Pending", ""
    return {
        "key": g.key,
        "name": g.name,
        "api": g.api,
        "minMember": need,
        "bound": len(g.bound),
        "waiting": len(g.waiting),
        "missing": missing,
        "status": status,
        "blocker": blocker,
        "members": {"bound": sorted(g.bound), "waiting": sorted(g.waiting)},
    }


def gangs_view(gangs: Iterable[GangFacts]) -> list[dict[str, Any]]:
    """Blocked and waiting gangs first (they are why people look), then by name."""
    order = {"Blocked": 0, "Waiting": 1, "Pending": 2, "Scheduled": 3}
    views = [gang_view(g) for g in gangs]
    views.sort(key=lambda v: (order[v["status"]], v["name"], v["api"]))
    return views


# -- profiles -------------------------------------------------------------------------------
def profile_view(
    scheduler_name: str,
    chain: Mapping[str, Sequence[str]],
    *,
    source: str,
    ready: bool = True,
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    """A profile: its schedulerName, where it comes from (built-in or a
    SchedulingProfile), Ready, and the plugins at each extension point in order."""
    return {
        "schedulerName": scheduler_name,
        "source": source,
        "ready": ready,
        "reason": reason,
        "message": message,
        "chain": [{"point": point, "plugins": list(names)} for point, names in chain.items()],
    }


# -- explain --------------------------------------------------------------------------------
def _split_weight(s: str) -> tuple[str, int]:
    name, _, weight = s.rpartition(":")
    if not name:
        return s, 1
    try:
        return name, int(weight)
    except ValueError:
        return s, 1


def explain_view(exp: Mapping[str, Any]) -> dict[str, Any]:
    """``Explanation.to_dict`` as pictures: a heat-map cell per node (by name), a legend
    of rejecting plugins (most nodes first) and a bar per Score plugin for the best node
    (with the highest score any feasible node got from that plugin)."""
    feasible = list(exp.get("feasible") or ())
    rejected = list(exp.get("rejected") or ())
    best_total = max((int(n["total"]) for n in feasible), default=0)
    cells: list[dict[str, Any]] = []
    for n in feasible:
        total = int(n["total"])
        cells.append(
            {
                "node": n["node"],
                "feasible": True,
                "plugin": "",
                "reason": f"fits (score {total})",
                "total": total,
                "shade": round(total / best_total, 3) if best_total > 0 else 1.0,
                "colour": FEASIBLE_COLOUR,
            }
        )
    legend: dict[str, int] = {}
    for n in rejected:
        plugin = str(n.get("plugin") or "") or "(none)"
        legend[plugin] = legend.get(plugin, 0) + 1
        cells.append(
            {
                "node": n["node"],
                "feasible": False,
                "plugin": plugin,
                "code": n.get("code", ""),
                "reason": "; ".join(n.get("reasons") or ()),
                "total": None,
                "shade": 1.0,
                "colour": plugin_colour(plugin),
            }
        )
    cells.sort(key=lambda c: str(c["node"]))
    legend_rows = [
        {"plugin": p, "nodes": c, "colour": plugin_colour(p)}
        for p, c in sorted(legend.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    if feasible:
        legend_rows.insert(0, {"plugin": "fits", "nodes": len(feasible), "colour": FEASIBLE_COLOUR})
    best = feasible[0] if feasible else None
    bars = []
    for s in exp.get("scorePlugins") or ():
        plugin, weight = _split_weight(str(s))
        if not any(plugin in (n.get("scores") or {}) for n in feasible):
            continue
        bars.append(
            {
                "plugin": plugin,
                "weight": weight,
                "score": int((best or {}).get("scores", {}).get(plugin, 0)),
                "max": max(int((n.get("scores") or {}).get(plugin, 0)) for n in feasible),
                "limit": 100 * weight,
            }
        )
    return {
        "pod": f"{exp['namespace']}/{exp['name']}",
        "profile": exp.get("profile", ""),
        "status": exp.get("status", "Pending"),
        "node": exp.get("node"),
        "message": exp.get("message", ""),
        "cells": cells,
        "legend": legend_rows,
        "best": None if best is None else {"node": best["node"], "total": int(best["total"])},
        "bars": bars,
        "feasible": [
            {"node": n["node"], "total": int(n["total"]), "scores": dict(n.get("scores") or {})}
            for n in feasible[:20]
        ],
        "rejected": [
            {
                "node": n["node"],
                "plugin": n.get("plugin") or "-",
                "code": n.get("code", ""),
                "reason": "; ".join(n.get("reasons") or ()),
            }
            for n in sorted(rejected, key=lambda n: str(n["node"]))
        ],
        "podGroup": exp.get("podGroup"),
    }
