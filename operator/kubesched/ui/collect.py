"""What the web view shows, read from a scheduler in this process (no API request).

The facts come from what the scheduler already holds: its queues and cache
(:func:`kubesched.scheduler.cachedump.queued_pods`), the profiles it serves, the
PodGroups in its object store with Coscheduling's report of each gang's last attempt,
and :func:`kubesched.scheduler.explain.explain_pod` for one pending pod at a time.
:mod:`kubesched.ui.shape` turns them into the page's JSON. Everything here runs on the
scheduler's event loop, synchronously (reading the cache and queues while no cycle runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.api.gangs import (
    GANG_STORE_KINDS,
    WORKLOAD_STORE_KIND,
    GangSpec,
    InvalidGang,
    api_of,
    gang_key,
    parse_gang,
    parse_key,
)
from kubesched.framework.types import ObjectError, Pod
from kubesched.plugins.coscheduling import plugin as cosched
from kubesched.profile_status import ProfileBook
from kubesched.profiles import default_profile_spec
from kubesched.scheduler.cachedump import queued_pods
from kubesched.scheduler.explain import explain_pod
from kubesched.scheduler.scheduler import Scheduler
from kubesched.ui.shape import (
    GangFacts,
    QueueHistory,
    explain_view,
    gangs_view,
    plugin_colours,
    profile_view,
    queues_view,
)

__all__ = ["explain_for", "queue_counts", "state"]

PROFILE_KIND = "SchedulingProfile"


def _coscheduling(sched: Scheduler) -> Any:
    for p in sched.profiles.values():
        for plugin in p.framework.chain.pre_filter:
            if plugin.name == cosched.NAME:
                return plugin
    return None


def _gang_of(sched: Scheduler, pod: Pod) -> str | None:
    fwk = sched.framework_for(pod)
    if fwk is None:
        return None
    for plugin in fwk.chain.pre_filter:
        key_of = getattr(plugin, "gang_key", None)
        if plugin.name == cosched.NAME and key_of is not None:
            key: str | None = key_of(pod)
            return key
    return None


def _gangs(sched: Scheduler) -> list[GangFacts]:
    store = sched.store
    facts: dict[str, GangFacts] = {}
    if store is not None:
        for kind in sorted(GANG_STORE_KINDS):
            api = api_of(kind)
            if api is None:
                continue
            for obj in store.list(kind):
                meta = obj.get("metadata") or {}
                ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
                key = gang_key(api, ns, name)
                try:
                    spec: GangSpec | None = parse_gang(
                        kind, obj, lambda n, w: store.get(WORKLOAD_STORE_KIND, n, w)
                    )
                    problem = ""
                except InvalidGang as e:
                    spec, problem = None, f"PodGroup {ns}/{name} is invalid: {e}"
                facts[key] = GangFacts(
                    key,
                    f"{ns}/{name}",
                    api.value,
                    spec.min_member if spec is not None else None,
                    problem=problem,
                )
    placed = {p.uid for ni in sched.cache.node_infos() for p in ni.pods}
    members: list[tuple[Pod, bool]] = [
        (p, True) for ni in sched.cache.node_infos() for p in ni.pods
    ]
    members += [(p, False) for p in sched.unscheduled.values() if p.uid not in placed]
    for pod, on_node in members:
        member_of = _gang_of(sched, pod)
        if member_of is None:
            continue
        g = facts.get(member_of)
        if g is None:
            api, ns, name = parse_key(member_of)
            g = facts[member_of] = GangFacts(
                member_of,
                f"{ns}/{name}",
                api.value,
                None,
                problem=f'pod group "{member_of}" does not exist; waiting for it to be created',
            )
        (g.bound if on_node else g.waiting).append(pod.key)
    plugin = _coscheduling(sched)
    if plugin is not None:
        for g in facts.values():
            api, ns, name = parse_key(g.key)
            report = plugin.report(ns, name, api)
            if report is not None and report.blocked:
                g.blocker = str(report.blocked)
    return list(facts.values())


def _ready_of(status: Mapping[str, Any] | None) -> tuple[bool | None, str, str]:
    for c in (status or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return (
                c.get("status") == "True",
                str(c.get("reason") or ""),
                str(c.get("message") or ""),
            )
    return None, "", ""


def _profiles(sched: Scheduler, book: ProfileBook | None) -> list[dict[str, Any]]:
    """Every profile served, with the SchedulingProfile behind it and its Ready condition,
    then the SchedulingProfiles that serve nothing (invalid, or a schedulerName taken).
    ``book``: ``kubesched run``'s; without one, the SchedulingProfile objects in the
    store (a scenario's are compiled before they reach it: they all serve)."""
    statuses: dict[str, Mapping[str, Any]] = {}
    serving: dict[str, str] = {}  # schedulerName -> SchedulingProfile
    if book is not None:
        statuses = dict(book.statuses)
        serving = book.serving()
    elif sched.store is not None:
        for obj in sched.store.list(PROFILE_KIND):
            name = str((obj.get("metadata") or {}).get("name") or "")
            statuses[name] = obj.get("status") or {}
            serving[str((obj.get("spec") or {}).get("schedulerName") or "")] = name
    out = []
    for scheduler_name, p in sorted(sched.profiles.items()):
        owner = serving.get(scheduler_name)
        if owner is None:
            source = (
                "default plugins"
                if p.spec == default_profile_spec(scheduler_name)
                else "customised"
            )
            ready, reason, message = True, "", ""
        else:
            source = f"SchedulingProfile {owner}"
            found, reason, message = _ready_of(statuses.pop(owner, None))
            ready = True if found is None else found  # it serves: its chain is in use
        out.append(
            profile_view(
                scheduler_name,
                p.framework.chain.names(),
                source=source,
                ready=ready,
                reason=reason,
                message=message,
            )
        )
    for name, status in sorted(statuses.items()):
        if name in serving.values():
            continue
        found, reason, message = _ready_of(status)
        out.append(
            profile_view(
                "-",
                {},
                source=f"SchedulingProfile {name}",
                ready=False,
                reason=reason or "NotServing",
                message=message or "serves no schedulerName here",
            )
        )
    return out


def explain_for(sched: Scheduler, namespace: str, name: str) -> dict[str, Any] | None:
    """The explain view of one pod the scheduler knows (None if it knows none such).
    Raises LookupError when no profile serves the pod, ObjectError when it is malformed."""
    raw: Any = None
    if sched.store is not None:
        raw = sched.store.get("Pod", namespace, name)
    if raw is None:
        for pod in sched.unscheduled.values():
            if pod.namespace == namespace and pod.name == name:
                raw = pod.raw
                break
    if raw is None:
        return None
    return explain_view(explain_pod(sched, Pod(dict(raw))).to_dict())


def queue_counts(sched: Scheduler) -> dict[str, int]:
    """Pods per pool over every profile's queue (cheap: no pod is copied)."""
    counts: dict[str, int] = {}
    for q in sched.queues.queues().values():
        for _, pool in q.pending_pods():
            counts[pool] = counts.get(pool, 0) + 1
    return counts


def state(
    sched: Scheduler,
    history: QueueHistory,
    *,
    now: float,
    source: str,
    explain_all: int = 0,
    profile_book: ProfileBook | None = None,
) -> dict[str, Any]:
    """The page's state: queues (with ``history``, which gets a first sample at ``now``
    if it has none), gangs, profiles, node count; with ``explain_all``, the explain views
    of up to that many pending pods (a static page has no server to ask)."""
    pending, in_flight = queued_pods(sched)  # not cache_dump: no copy of every node
    queues = queues_view(pending, len(in_flight))
    if not history.samples():
        history.record(now, queues["counts"])
    queues["history"] = history.samples()
    profiles = _profiles(sched, profile_book)
    doc: dict[str, Any] = {
        "source": source,
        "generatedAt": now,
        "nodes": sched.cache.node_count(),
        "pods": sched.cache.pod_count(),
        "queues": queues,
        "gangs": gangs_view(_gangs(sched)),
        "profiles": profiles,
        "colours": plugin_colours(
            n for p in profiles for point in p["chain"] for n in point["plugins"]
        ),
    }
    if explain_all:
        explained: dict[str, Any] = {}
        for key in [str(d["pod"]) for d in pending][:explain_all]:
            ns, _, name = key.partition("/")
            try:
                view = explain_for(sched, ns, name)
            except (LookupError, ObjectError) as e:
                view = {"pod": key, "error": str(e)}
            if view is not None:
                explained[key] = view
        doc["explanations"] = explained
    return doc
