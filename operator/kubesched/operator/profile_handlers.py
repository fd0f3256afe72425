"""SchedulingProfiles on a real cluster: Kopf change handlers -> :class:`ProfileBook`.

``@kopf.on.create`` / ``update`` (of the spec) / ``resume`` compile the profile and swap
its chain in (``Scheduler.set_profile``: synchronous, on the loop, so between cycles;
pods in a binding cycle finish with the chain that started them); ``@kopf.on.delete``
stops scheduling its schedulerName (pods stay pending, untouched; the built-in default
comes back for a served name of the settings) and re-applies the profiles refused with
``SchedulerNameConflict``, one of which may serve now. The validation, the status shape and
the bookkeeping are :mod:`kubesched.profile_status` (``kubesched validate`` says the same).

Start: ``run`` calls :meth:`ProfileController.load` in its initial sync, before the first
cycle: every SchedulingProfile is listed and applied oldest first (creationTimestamp,
then name), so which of two profiles with one schedulerName serves does not depend on
the order Kopf's workers happen to run in; the handlers wait for it, and a resume of a
profile the load already applied (same uid and generation) only checks its status.

Selection: an instance applies only the profiles its ``profile_selector`` (a label
selector; empty: all) matches. The start-up list asks the API server for those
(``labelSelector``); the handlers see every profile and skip the others, and a profile
whose labels change is taken up, or forgotten as if deleted, by the same check (an update
handler on ``metadata.labels``). The filter is ours, not a Kopf filter, on purpose: Kopf
removes its finalizer from an object no handler of its matches, and every installation
shares the finalizer ``kubesched.dev/finalizer``, so two installations with Kopf filters
would take turns adding and removing it on each other's profiles. So every
installation's Kopf keeps the finalizer and the diff-base annotation on every profile
(the same content from each, as from replicas), and only the selected profiles are
compiled, served, and given a status and Events. A profile deleted once another
installation had already released its finalizer reaches us as a DELETED event only (no
deletion handler call): a watch handler forgets it then.

Replicas: every replica keeps its book current (followers compile too), so a new leader
serves the same chains at once. Status is written by whichever replica finds it differs
from what the API server has (``lastTransitionTime`` aside): replicas compute the same
status from the same spec, so after the first write the others find nothing to write, and
a replica that takes over never leaves a stale status behind (no hand-over step is
needed). Our handlers never fail on a bad spec (that is a status), so Kopf persists only
the finalizer ``kubesched.dev/finalizer`` and its ``kubesched.dev`` diff-base annotation,
the same content from every replica; it never touches pods (they only have event
handlers). Each change of the Ready condition is an Event on the profile, reported by the
scheduler's name (``Compiled`` Normal, the refusal reasons Warning); two replicas racing
on the first write may both post it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kubesched.api.profile import ProfileSpec
from kubesched.cluster.kinds import PROFILE
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kube_http import JSON_PATCH
from kubesched.cluster.prefetch import Prefetched
from kubesched.framework.cluster_port import ClusterError, NotFound
from kubesched.framework.labels import parse_label_selector
from kubesched.framework.registry import Registry
from kubesched.profile_status import COMPILED, ProfileBook
from kubesched.profiles import compile_profile
from kubesched.scheduler.scheduler import Scheduler

if TYPE_CHECKING:  # Kopf is imported once the cache is synced (see operator/run.py)
    import kopf

__all__ = ["GROUP", "PLURAL", "VERSION", "ProfileController", "register"]


log = logging.getLogger("kubesched.operator.profiles")

GROUP, _, VERSION = PROFILE.group_version.partition("/")
PLURAL = PROFILE.plural
PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
RETRY_DELAY = 5.0
"""Seconds before Kopf retries a handler whose status write failed (API unavailable)."""
LOAD_ATTEMPTS = 5
"""Tries of the start-up list (a CRD installed moments ago answers 429 for a while)."""
DISCOVERY = f"/apis/{GROUP}/{VERSION}"
"""The group version's discovery document: Kopf resolves the kinds it watches from it."""
CRD_POLL = 60.0
"""Seconds between looks for the SchedulingProfile CRD while it is not installed."""

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _age_key(obj: Obj) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def _pruned(value: Any) -> Any:
    """Without null fields (the API server keeps nullable nulls; absent reads the same)."""
    if isinstance(value, Mapping):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def _comparable(status: Obj | None) -> Any:
    out = dict(_pruned(status or {}))
    out["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"}
        for c in out.get("conditions") or ()
        if isinstance(c, Mapping)
    ]
    return out


def _ready(status: Obj | None) -> tuple[str, str] | None:
    for c in (status or {}).get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return str(c.get("status")), str(c.get("reason"))
    return None


class ProfileController:
    """One replica's SchedulingProfiles: its :class:`ProfileBook` and the status writes."""

    def __init__(
        self,
        scheduler: Scheduler,
        cluster: KubeCluster,
        *,
        builtin_names: Sequence[str],
        reporter: str,
        registry: Registry | None = None,
        selector: str = "",
    ) -> None:
        self.scheduler = scheduler
        self.selector = selector.strip()
        """The label selector of the profiles applied here (empty: all)."""
        self._selector = parse_label_selector(self.selector)
        self.cluster = cluster
        self.builtin_names = tuple(builtin_names)
        self.reporter = reporter
        self.registry = registry
        self.book = ProfileBook(scheduler, registry=registry, builtin_name=self.builtin_names[0])
        self.loaded = asyncio.Event()
        """Set once :meth:`load` applied the profiles that existed at start."""
        self.served: bool | None = None
        """Whether :meth:`load` found the CRD installed (None before it ran)."""
        self.crd_found = asyncio.Event()
        """Set once the CRD :meth:`load` did not find is served (:meth:`watch_crd`)."""
        self._applied: dict[str, tuple[str, int]] = {}
        """name -> (uid, generation) last applied."""
        self._bodies: dict[str, dict[str, Any]] = {}
        """name -> the object last seen, with the status last written: what a re-apply
        after a delete uses (no read, so no ``get`` permission is needed)."""

    # -- start ----------------------------------------------------------------------------------
    async def load(self, prefetched: Prefetched | None = None) -> int:
        """Apply every SchedulingProfile, oldest first; returns how many. Without the CRD
        there are none (the built-in default profile serves). ``prefetched``: the start's
        listing of them (:meth:`kubesched.cluster.prefetch.Prefetch.take`; every profile,
        this replica's selected here), taken instead of the first LIST."""
        items: list[Obj] = []
        for attempt in range(LOAD_ATTEMPTS):
            try:
                pages = await prefetched(PROFILE.kind) if prefetched and not attempt else None
                if pages is not None:
                    listed = {"items": [o for page, _ in pages for o in page]}
                else:
                    query = {"labelSelector": self.selector} if self.selector else None
                    listed = await self.cluster.request("GET", PATH, query=query)
                items = [o for o in listed.get("items") or () if self.selects(o)]
                self.served = True
                break
            except NotFound:
                log.info(
                    "SchedulingProfiles are not served (the CRD is not installed): the "
                    "built-in profiles serve; looking for the CRD every %.0f s",
                    CRD_POLL,
                )
                self.served = False
                break
            except ClusterError as e:
                # e.g. 429 "storage is (re)initializing" just after the CRD was installed
                if not e.retryable or attempt == LOAD_ATTEMPTS - 1:
                    raise
                log.warning("listing SchedulingProfiles failed, retrying: %s", e)
                await asyncio.sleep(RETRY_DELAY / LOAD_ATTEMPTS)
        items.sort(key=_age_key)
        for obj in items:
            if not _meta(obj).get("deletionTimestamp"):
                await self._apply(obj)
        self.loaded.set()
        return len(items)

    async def watch_crd(self, interval: float | None = None) -> None:
        """Until cancelled. If :meth:`load` found no CRD, look for it every ``interval``
        seconds (:data:`CRD_POLL`); once the API server serves it and lists it in its
        discovery (what Kopf reads when it starts), say so and set :attr:`crd_found`:
        ``kopf_start`` then restarts Kopf, which resolves the kinds it watches only when it
        starts (its CRD scanning is off, see ``kopf_settings``), and Kopf's handlers apply
        the profiles from then on."""
        await self.loaded.wait()
        if self.served is False:
            await self._until_crd(CRD_POLL if interval is None else interval)
            log.info(
                "the SchedulingProfile CRD is installed now: SchedulingProfiles are applied "
                "from now on (Kopf restarts to watch them)"
            )
            self.served = True
            self.crd_found.set()
        await asyncio.Event().wait()  # run's tasks end only when cancelled

    async def _until_crd(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.cluster.request("GET", PATH, query={"limit": "1"})
                found = await self.cluster.request("GET", DISCOVERY)
            except NotFound:
                continue
            except (ClusterError, OSError, TimeoutError) as e:
                log.debug("looking for the SchedulingProfile CRD: %s", e)
                continue
            resources = found.get("resources") if isinstance(found, Mapping) else None
            if any(isinstance(r, Mapping) and r.get("name") == PLURAL for r in resources or ()):
                return

    def selects(self, obj: Obj) -> bool:
        """Whether this instance applies ``obj`` (its labels match the selector)."""
        labels = _meta(obj).get("labels")
        return self._selector.matches(labels if isinstance(labels, Mapping) else {})

    def holds(self, name: str) -> bool:
        """Whether the profile ``name`` is applied here (serving, or refused with a status)."""
        return name in self._bodies

    # -- handlers -------------------------------------------------------------------------------
    async def applied(self, body: Obj) -> None:
        """Created, spec or labels changed, or resumed. A profile the selector does not
        match is skipped; one that stopped matching is forgotten as if deleted."""
        await self.loaded.wait()
        if self.selects(body):
            await self._apply(body)
            return
        name = str(_meta(body).get("name") or "")
        if self.holds(name):
            log.info("SchedulingProfile %s no longer matches %r: forgotten", name, self.selector)
            await self._forget(name)

    async def deleted(self, name: str) -> None:
        """Deleted (its deletion handler, or the DELETED event: whichever comes first)."""
        await self.loaded.wait()
        if self.holds(name):
            await self._forget(name)

    async def _forget(self, name: str) -> None:
        self._applied.pop(name, None)
        self._bodies.pop(name, None)
        served = self.book.served.get(name)
        self.book.delete(name)
        released = served.profile.scheduler_name if served is not None else None
        if released in self.builtin_names and released != self.book.builtin_name:
            # another scheduler name of the settings: its built-in default comes back
            spec = ProfileSpec(scheduler_name=released)
            services = self.scheduler.services()
            self.scheduler.set_profile(compile_profile(spec, services, self.registry))
        log.info("SchedulingProfile %s forgotten: %s no longer served by it", name, released)
        await self._reapply_conflicting()

    # -- internals ------------------------------------------------------------------------------
    async def _apply(self, obj: Obj, *, force: bool = False) -> None:
        meta = _meta(obj)
        name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
        generation = int(meta.get("generation") or 1)
        current = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
        self._bodies[name] = dict(obj)
        known = self.book.statuses.get(name)
        if not force and known is not None and self._applied.get(name) == (uid, generation):
            status = known  # applied already (the initial load): only the status to check
        else:
            before = self.book.served.get(name)
            spec = obj.get("spec")
            status = self.book.apply(
                name, spec if isinstance(spec, Mapping) else None, generation, current
            )
            self._applied[name] = (uid, generation)
            after = self.book.served.get(name)
            log.info(
                "SchedulingProfile %s generation %d: %s",
                name,
                generation,
                status["conditions"][0]["message"],
            )
            if (
                before is not None
                and after is not None
                and (before.profile.scheduler_name != after.profile.scheduler_name)
            ):
                await self._write_status(name, uid, status, current)
                await self._reapply_conflicting()  # the old name is free
                return
        await self._write_status(name, uid, status, current)

    async def _reapply_conflicting(self) -> None:
        names = self.book.conflicting()
        if not names:
            return
        found = [self._bodies[n] for n in names if n in self._bodies]
        for obj in sorted(found, key=_age_key):
            await self._apply(obj, force=True)

    async def _write_status(self, name: str, uid: str, status: Obj, current: Obj | None) -> None:
        if _comparable(status) == _comparable(current):
            return
        try:
            await self.cluster.request(
                "PATCH",
                f"{PATH}/{name}/status",
                [{"op": "add", "path": "/status", "value": _pruned(status)}],
                content_type=JSON_PATCH,
            )
        except NotFound:
            return  # deleted meanwhile: its delete handler follows
        except ClusterError as e:
            import kopf

            raise kopf.TemporaryError(f"writing the status: {e}", delay=RETRY_DELAY) from e
        if name in self._bodies:
            self._bodies[name] = {**self._bodies[name], "status": _pruned(status)}
        ready = _ready(status)
        if ready is not None and ready != _ready(current):
            condition = status["conditions"][0]
            self.cluster.post_event(
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "SchedulingProfile",
                    "name": name,
                    "uid": uid,
                },
                event_type="Normal" if ready[1] == COMPILED else "Warning",
                reason=ready[1],
                action="Reconcile",
                message=str(condition["message"]),
                reporting_controller=self.reporter,
            )


def register(registry: kopf.OperatorRegistry, controller: ProfileController) -> None:
    """The SchedulingProfile handlers, on ``run``'s own registry."""
    import kopf

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id="apply")
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id="apply")
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="apply", field="spec")
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id="select", field="metadata.labels")
    async def apply_profile(body: kopf.Body, **_: Any) -> None:
        await controller.applied(dict(body))

    @kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry, id="forget")
    async def forget_profile(name: str | None, **_: Any) -> None:
        await controller.deleted(str(name or ""))

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="gone")
    async def gone_profile(type: str | None, name: str | None, **_: Any) -> None:
        # the deletion handler did not run here if another installation removed the
        # shared finalizer first; a no-op for a profile forgotten already
        if type == "DELETED":
            await controller.deleted(str(name or ""))
