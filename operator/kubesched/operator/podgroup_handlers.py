"""PodGroup status, kept current by the leader (level-based).

The desired ``status`` of a PodGroup is computed by :func:`kubesched.operator.gang_status.podgroup_status`
from what this replica already holds: the PodGroup and its member pods in the object
store, and Coscheduling's report (members waiting at Permit, why the gang does not fit,
whether its last attempt timed out). It is written to the status subresource only when it
differs from what the API server has. Two triggers:

* a watch event of a member pod (or a new or changed PodGroup), debounced, so a gang of
  500 pods binding at once costs one write, not 500;
* a tick every :data:`STATUS_INTERVAL` seconds over every PodGroup of the three gang
  APIs (:meth:`PodGroupStatusWriter.run_ticks`), for what no watch event shows: members
  reserved at Permit, a Permit timeout. A tick that finds a status unchanged writes
  nothing.

Each change of the phase (or of the ``PodGroupScheduled`` reason, so a timeout is
reported even when the phase stays) is also an ``events.k8s.io/v1`` Event on the PodGroup,
reported by the scheduler's name: ``Scheduled``, ``Running``, ``Succeeded`` (Normal);
``Unschedulable``, ``Timeout``, ``Failed`` (Warning); ``Pending``, ``Scheduling``.

Only the leader computes and writes; a follower's ticks return at once. Nothing of ours
stays on a PodGroup but its status: no finalizer, no annotation, so deleting one never
waits for a running kubesched, and uninstalling kubesched leaves none stuck. Until
2026-11 a Kopf timer did the ticks and, as Kopf does for every object with a timer, put
its finalizer (:data:`kubesched.api.meta.FINALIZER`) on each kubesched.dev PodGroup; the
leader takes that off any PodGroup still carrying it
(:meth:`PodGroupStatusWriter.release`), so a group created under an older release can be
deleted once this one has run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic

from kubesched.api.gangs import (
    GANG_STORE_KINDS,
    STORE_KINDS,
    WORKLOAD_STORE_KIND,
    GangAPI,
    InvalidGang,
    api_of,
    gang_key,
    parse_gang,
    parse_key,
    pod_ref,
    resolve,
)
from kubesched.api.meta import FINALIZER, rfc3339
from kubesched.api.podgroup import (
    CONDITION_SCHEDULED,
    GROUP,
    VERSION,
    validation_message,
)
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kube_http import JSON_PATCH, MERGE_PATCH
from kubesched.framework.cluster_port import ClusterError, NotFound
from kubesched.operator import gang_status
from kubesched.operator.handlers import WatchRouter
from kubesched.scheduler.scheduler import Scheduler

__all__ = ["DEBOUNCE", "RELEASE_INTERVAL", "STATUS_INTERVAL", "PodGroupStatusWriter", "attach"]

log = logging.getLogger("kubesched.operator.podgroups")

Obj = Mapping[str, Any]

STATUS_INTERVAL = 3.0
"""Seconds between ticks: how stale "waiting at Permit" counts and a
timeout may be at most (member pod changes are written within :data:`DEBOUNCE`)."""
DEBOUNCE = 0.25
"""Seconds a pod event waits for more of its gang's events before the status is written."""
GONE_FOR = 60.0
"""Seconds a PodGroup whose status write met 404 is not written again unless a watch event
for it comes first (its DELETED, normally, within seconds of the watch's return); then
one more try, should the 404 have been the server's mistake and the group still there."""
RELEASE_INTERVAL = 30.0
"""Seconds between two tries to take :data:`~kubesched.api.meta.FINALIZER` off one live
PodGroup. During a rolling upgrade the older replicas' Kopf puts it back at once; the
older replicas are gone within minutes, and until then this bounds the back and forth to
a write a PodGroup every 30 s from each side. A PodGroup being deleted is released at
every event and tick: Kopf adds no finalizer to those."""
INVALID_SPEC = "InvalidSpec"
"""PodGroupScheduled=False: the spec does not validate (the CRD schema refuses most such
specs at admission; one that gets through is reported here and on each member's events)."""
WARNING_REASONS = frozenset({"Unschedulable", "Timeout", "Failed", "BelowMinimum", INVALID_SPEC})


@dataclass(frozen=True, slots=True)
class _Written:
    uid: str
    resource_version: int
    status: dict[str, Any]


def _mapping(value: Any) -> Obj:
    if type(value) is dict:  # the common case, without the ABC check (every pod event)
        return value
    return value if isinstance(value, Mapping) else {}


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _phase_and_reason(status: Obj) -> tuple[str | None, str | None]:
    reason = None
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == CONDITION_SCHEDULED:
            reason = c.get("reason")
    return status.get("phase"), reason


class PodGroupStatusWriter:
    """Computes and writes PodGroup status; fed by the WatchRouter and its own ticks."""

    def __init__(
        self,
        cluster: KubeCluster,
        scheduler: Scheduler,
        *,
        reporter: str,
        leading: Callable[[], bool],
        debounce: float = DEBOUNCE,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.reporter = reporter
        self.leading = leading
        self.debounce = debounce
        self._wall_clock = wall_clock
        self._members: dict[str, set[str]] = {}
        """Group key -> keys (namespace/name) of the pods that name it."""
        self._group_of: dict[str, str] = {}
        self._written: dict[str, _Written] = {}
        """Our last write per group, until the watch brings it (the store may lag)."""
        self._released: dict[str, float] = {}
        """Group key -> loop time of the last try to take the finalizer off it."""
        self._gone: dict[str, tuple[str, float]] = {}
        """Group key -> (uid, loop time) of a group whose status write the API server
        answered with 404 (deleted while the watch was away, e.g. across an API server
        restart): not written again, by member events or ticks, until the store's next
        event for the group or for :data:`GONE_FOR` seconds."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._dirty: set[str] = set()
        self._flush: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.writes = 0
        """Status patches made (tests, logs)."""

    # -- watch events ------------------------------------------------------------------------------
    def on_event(self, kind: str, event_type: str, obj: Obj, old: Obj | None) -> None:
        """The WatchRouter's listener: keeps the membership index, marks groups dirty."""
        if kind == "Pod":
            ns, name = _key(obj)
            key = self._gang_of(ns, obj) if event_type != "DELETED" else None
            if key is None and not self._group_of:
                return  # no pod names a gang (the common cluster): nothing to index
            pod_key = f"{ns}/{name}"
            prev = self._group_of.get(pod_key)
            if prev != key:
                if prev is not None:
                    members = self._members.get(prev)
                    if members is not None:
                        members.discard(pod_key)
                        if not members:
                            del self._members[prev]
                    self.touch(prev)
                if key is None:
                    self._group_of.pop(pod_key, None)
                else:
                    self._group_of[pod_key] = key
                    self._members.setdefault(key, set()).add(pod_key)
            if key is not None:
                self.touch(key)
        elif kind in GANG_STORE_KINDS:
            ns, name = _key(obj)
            api = api_of(kind)
            assert api is not None
            key = gang_key(api, ns, name)
            self._gone.pop(key, None)  # news of the group: write again if it is there
            if event_type == "DELETED":
                self._written.pop(key, None)
                self._locks.pop(key, None)
                self._released.pop(key, None)
            elif (
                old is None
                or old.get("spec") != obj.get("spec")
                or FINALIZER in (_mapping(obj.get("metadata")).get("finalizers") or ())
            ):
                self.touch(key)

    def _exists(self, kind: str, namespace: str, name: str) -> bool:
        return self.cluster.get(kind, namespace, name) is not None

    def _gang_of(self, namespace: str, pod: Obj) -> str | None:
        """The pod's gang key (kubesched.api.gangs: the precedence Coscheduling uses)."""
        labels = _mapping(pod.get("metadata")).get("labels")
        ref = pod_ref(namespace, _mapping(labels), _mapping(pod.get("spec")))
        return None if ref is None else resolve(ref, self._exists)

    def touch(self, key: str) -> None:
        """Write ``namespace/name``'s status soon (after the debounce), if leading."""
        if not self.leading():
            return
        self._dirty.add(key)
        if self._flush is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop: the timer will do it
            self._flush = loop.call_later(self.debounce, self._start_flush)

    def _start_flush(self) -> None:
        self._flush = None
        keys, self._dirty = sorted(self._dirty), set()
        task = asyncio.get_running_loop().create_task(self._sync_all(keys))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sync_all(self, keys: list[str]) -> None:
        for key in keys:
            await self.sync(key)

    async def close(self) -> None:
        """Stop pending writes (the shutdown)."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the status ----------------------------------------------------------------------------------
    def _report(self, namespace: str, name: str, api: GangAPI = GangAPI.KUBESCHED) -> Any:
        """Coscheduling's GangReport for the group, from whichever profile holds it."""
        seen: set[int] = set()
        for profile in list(self.scheduler.profiles.values()):
            chain = profile.framework.chain
            for plugin in (chain.queue_sort, *chain.permit, *chain.pre_filter):
                report = getattr(plugin, "report", None)
                if report is None or id(plugin) in seen:
                    continue
                seen.add(id(plugin))
                found = (
                    report(namespace, name)
                    if api is GangAPI.KUBESCHED
                    else report(namespace, name, api)
                )
                if found is not None:
                    return found
        return None

    def _member_pods(self, key: str) -> list[Obj]:
        members = []
        for pod_key in sorted(self._members.get(key, ())):
            pod_ns, _, pod_name = pod_key.partition("/")
            pod = self.cluster.get("Pod", pod_ns, pod_name)
            if pod is not None:
                members.append(pod)
        return members

    def _start(self, group: Obj, report: Any, now: datetime) -> str | None:
        if (
            report is not None
            and report.schedule_start is not None
            and not (group.get("status") or {}).get("scheduleStartTime")
        ):
            # Coscheduling keeps loop time; the first try is kept once written.
            ago = asyncio.get_running_loop().time() - report.schedule_start
            return rfc3339(now - timedelta(seconds=max(0.0, ago)))
        return None

    def desired_foreign(self, api: GangAPI, group: Obj) -> dict[str, Any] | None:
        """The status of a scheduler-plugins or Kubernetes PodGroup in its own shape
        (:mod:`kubesched.operator.gang_status`), None when there is nothing to write."""
        ns, name = _key(group)
        key = gang_key(api, ns, name)
        members = self._member_pods(key)
        now = self._wall_clock()
        report = self._report(ns, name, api)
        try:
            spec = parse_gang(
                STORE_KINDS[api], group, lambda n, w: self.cluster.get(WORKLOAD_STORE_KIND, n, w)
            )
            min_member, invalid = spec.min_member, ""
        except InvalidGang as e:
            min_member, invalid = 1, f"PodGroup {key} is invalid: {e}"
        if api is GangAPI.SCHEDULER_PLUGINS:
            return gang_status.scheduler_plugins_status(
                group, min_member, members, schedule_start_time=self._start(group, report, now)
            )
        waiting = report.waiting_uids if report is not None else frozenset()
        placed = sum(
            1
            for p in members
            if _mapping(p.get("spec")).get("nodeName")
            or str(_mapping(p.get("metadata")).get("uid") or "") in waiting
        )
        blocked = invalid or (report.blocked if report is not None else "")
        error = not invalid and report is not None and bool(report.blocked) and report.error
        if not blocked and report is not None and report.timed_out:
            blocked = f'pod group "{key}" timed out waiting at Permit'
        conditions = gang_status.upstream_conditions(
            group, scheduled=not invalid and placed >= min_member, unschedulable=blocked,
            now=rfc3339(now), error=error,
        )  # fmt: skip
        return None if conditions is None else {"conditions": conditions}

    def desired(self, group: Obj) -> dict[str, Any]:
        """The status ``group`` should have now (raises pydantic's ValidationError)."""
        ns, name = _key(group)
        members = self._member_pods(f"{ns}/{name}")
        now = self._wall_clock()
        report = self._report(ns, name)
        start = self._start(group, report, now)
        return gang_status.podgroup_status(
            group,
            members,
            report.waiting_uids if report is not None else (),
            now=rfc3339(now),
            blocked=report.blocked if report is not None else "",
            timed_out=report.timed_out if report is not None else False,
            schedule_start_time=start,
        )

    async def sync(self, key: str) -> bool:
        """Write the group's status if it changed (leader only); True when written."""
        if not self.leading():
            return False
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            try:
                return await self._sync(key)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("PodGroup %s: status not written: %s", key, e)
                return False

    async def _sync(self, key: str) -> bool:
        api, ns, name = parse_key(key)
        group = self.cluster.get(STORE_KINDS[api], ns, name)
        if group is None or not self.leading():
            return False
        meta = group.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        gone = self._gone.get(key)
        if (
            gone is not None
            and gone[0] == uid
            and asyncio.get_running_loop().time() - gone[1] < GONE_FOR
        ):
            return False
        if api is GangAPI.KUBESCHED:
            await self.release(group)
        if meta.get("deletionTimestamp"):
            return False
        written = self._written.get(key)
        if written is not None and written.uid == uid and written.resource_version > _rv(group):
            group = {**group, "status": written.status}  # the watch has not brought it yet
        current: Obj = group.get("status") or {}
        status = self._desired_of(api, group)
        if status is None or all(current.get(k) == v for k, v in status.items()):
            return False
        path = f"/apis/{api.value}/namespaces/{ns}/podgroups/{name}/status"
        try:
            updated = await self.cluster.request(
                "PATCH", path, {"status": status}, content_type=MERGE_PATCH
            )
        except NotFound as e:
            self._gone[key] = (uid, asyncio.get_running_loop().time())
            log.info(
                "PodGroup %s: status not written, the API server has no such object (%s); "
                "not tried again until a watch event for it, or for %.0f s",
                key, e, GONE_FOR,
            )  # fmt: skip
            return False
        self.writes += 1
        if isinstance(updated, Mapping):
            self._written[key] = _Written(uid, _rv(updated), dict(updated.get("status") or status))
        if api is GangAPI.KUBESCHED:
            before, after = _phase_and_reason(current), _phase_and_reason(status)
            if before != after and (
                before != (None, None) or after != ("Pending", "WaitingForMembers")
            ):
                self._event(group, status)
        return True

    def _desired_of(self, api: GangAPI, group: Obj) -> dict[str, Any] | None:
        """The status to write in ``api``'s shape; ours says what is invalid in a spec."""
        if api is not GangAPI.KUBESCHED:
            return self.desired_foreign(api, group)
        try:
            return self.desired(group)
        except pydantic.ValidationError as e:
            return self._invalid(group, validation_message(e, "spec"))

    async def release(self, group: Obj) -> bool:
        """Take :data:`FINALIZER` off ``group`` if it carries it; True when taken.
        A JSON patch that first tests the list is what was read, so a finalizer another
        controller added meanwhile is never dropped: the test fails (422), and a later
        event or tick, with the object as it is now, tries again (for a live PodGroup at
        most every :data:`RELEASE_INTERVAL` seconds)."""
        meta = _mapping(group.get("metadata"))
        finalizers = meta.get("finalizers")
        if not isinstance(finalizers, list) or FINALIZER not in finalizers:
            return False
        ns, name = _key(group)
        now = asyncio.get_running_loop().time()
        key = gang_key(GangAPI.KUBESCHED, ns, name)
        last = self._released.get(key)
        if not meta.get("deletionTimestamp") and last is not None and now - last < RELEASE_INTERVAL:
            return False
        self._released[key] = now
        rest = [f for f in finalizers if f != FINALIZER]
        patch = [
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
            {"op": "replace", "path": "/metadata/finalizers", "value": rest}
            if rest
            else {"op": "remove", "path": "/metadata/finalizers"},
        ]
        try:
            await self.cluster.request(
                "PATCH",
                f"/apis/{GangAPI.KUBESCHED.value}/namespaces/{ns}/podgroups/{name}",
                patch,
                content_type=JSON_PATCH,
            )
        except NotFound:
            return False
        except ClusterError as e:
            log.info(
                "PodGroup %s/%s: %s (left by an older kubesched) not taken off yet: %s",
                ns, name, FINALIZER, e,
            )  # fmt: skip
            return False
        log.info("PodGroup %s/%s: took off %s, left by an older kubesched", ns, name, FINALIZER)
        return True

    async def tick(self) -> None:
        """Sync every PodGroup of the three gang APIs once (Permit waits and timeouts
        show in no watch event)."""
        for api in (GangAPI.KUBESCHED, GangAPI.UPSTREAM, GangAPI.SCHEDULER_PLUGINS):
            for group in list(self.cluster.list(STORE_KINDS[api])):
                ns, name = _key(group)
                await self.sync(gang_key(api, ns, name))

    async def run_ticks(self, interval: float = STATUS_INTERVAL) -> None:
        """:meth:`tick` every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            if self.leading():
                await self.tick()

    def _invalid(self, group: Obj, message: str) -> dict[str, Any]:
        """Pending, PodGroupScheduled=False InvalidSpec, the message naming the field."""
        current = group.get("status")
        generation = _mapping(group.get("metadata")).get("generation")
        last = rfc3339(self._wall_clock())
        for c in (current.get("conditions") or ()) if isinstance(current, Mapping) else ():
            if (
                isinstance(c, Mapping)
                and c.get("type") == CONDITION_SCHEDULED
                and c.get("status") == "False"
                and c.get("lastTransitionTime")
            ):
                last = str(c["lastTransitionTime"])
        condition: dict[str, Any] = {
            "type": CONDITION_SCHEDULED,
            "status": "False",
            "reason": INVALID_SPEC,
            "message": message,
            "lastTransitionTime": last,
        }
        out: dict[str, Any] = {"phase": "Pending", "conditions": [condition], "message": message}
        if isinstance(generation, int) and not isinstance(generation, bool):
            condition["observedGeneration"] = generation
            out["observedGeneration"] = generation
        return out

    def _event(self, group: Obj, status: Obj) -> None:
        phase, cond_reason = _phase_and_reason(status)
        reason = str(
            cond_reason
            if cond_reason in ("Unschedulable", "Timeout", "BelowMinimum", INVALID_SPEC)
            else phase
        )
        if phase == "Failed":
            reason = "Failed"
        message = str(status.get("message") or "")
        for c in status.get("conditions") or ():
            if not message and c.get("type") == CONDITION_SCHEDULED:
                message = str(c.get("message") or "")
        counts = status.get("counts") or {}
        summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        note = f"PodGroup is {phase}" + (f" ({summary})" if summary else "")
        if message:
            note += f": {message}"
        meta = group.get("metadata") or {}
        self.cluster.post_event(
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "PodGroup",
                "namespace": str(meta.get("namespace") or "default"),
                "name": str(meta.get("name") or ""),
                "uid": str(meta.get("uid") or ""),
            },
            event_type="Warning" if reason in WARNING_REASONS else "Normal",
            reason=reason,
            action="Scheduling",
            message=note,
            reporting_controller=self.reporter,
        )


def attach(
    router: WatchRouter, scheduler: Scheduler, *, reporter: str, leading: Callable[[], bool]
) -> PodGroupStatusWriter:
    """PodGroup status in a run: the writer, fed by the router; ``run`` starts its ticks
    (:meth:`PodGroupStatusWriter.run_ticks`) and closes it at the shutdown."""
    writer = PodGroupStatusWriter(router.cluster, scheduler, reporter=reporter, leading=leading)
    router.listeners.append(writer.on_event)
    return writer
