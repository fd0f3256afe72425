"""What DynamicResources keeps between cycles: parsed DRA objects and in-flight claims.

- Parsed DeviceClasses, ResourceSlices and DeviceTaintRules are kept per object
  (re-parsed only when the store holds a new dict for it), so the devices (and the CEL
  outcomes cached on them) survive from one pod to the next; slices alike but for their
  pool and node share their parsed devices (:mod:`kubesched.framework.dra.slice_bodies`). ``slices()`` serves them
  with the rules' taints added (as kube-scheduler's slice tracker does), each patched
  slice kept while neither it nor the rules applying to it change.
- In-flight allocations (kube-scheduler's ``SignalClaimPendingAllocation``): set in
  Reserve, dropped in Unreserve or once PreBind wrote them. They count as in use for
  every later pod, so two pods never get the same device while a bind is in flight.
- Assumed claims (``AssumeClaimAfterAPICall``): the claim as PreBind's write returned
  it, served instead of the store's copy until the store has caught up (a watch lags
  behind the write).

One tracker is shared by every profile of a scheduler (it is keyed on the object
store), as kube-scheduler's DRA manager is shared by its profiles.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.gangs import STORE_KINDS, GangAPI
from kubesched.framework.cluster_port import ObjectStore
from kubesched.framework.dra import (
    AllocatedState,
    AllocationResult,
    CelCache,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.framework.dra.node_cache import PoolCache
from kubesched.framework.dra.slice_bodies import SliceBodies
from kubesched.framework.dra.taint_rules import DeviceTaintRule, patch_slice
from kubesched.framework.types import ObjectError
from kubesched.plugins.dynamic_resources.in_use import InUse

__all__ = ["ClaimTracker", "tracker_for"]

log = logging.getLogger("kubesched.plugins.dynamic_resources")

Obj = Mapping[str, Any]

CLAIM = "ResourceClaim"
SLICE = "ResourceSlice"
CLASS = "DeviceClass"
TAINT_RULE = "DeviceTaintRule"
TEMPLATE = "ResourceClaimTemplate"


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(slots=True)
class Pending:
    """One in-flight allocation: the claim's uid, its allocation, the pods sharing it."""

    claim: ResourceClaim
    allocation: AllocationResult
    pods: set[str] = field(default_factory=set)
    group: str = ""
    """The PodGroup (its uid) the claim is reserved for, when a PodGroup claim: then the
    group's other members reuse this allocation instead of waiting for it."""


class ClaimTracker:
    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self.cel = CelCache()
        self._slices: dict[str, tuple[Obj, ResourceSlice | None]] = {}
        self._bodies = SliceBodies()
        self._classes: dict[str, tuple[Obj, DeviceClass | None]] = {}
        self._rules: dict[str, tuple[Obj, DeviceTaintRule | None]] = {}
        self._patched: dict[str, tuple[ResourceSlice, tuple[DeviceTaintRule, ...], ResourceSlice]]
        self._patched = {}
        """Slices with rule taints, by name: (as parsed, the rules applied, as patched)."""
        self._served: list[ResourceSlice] = []
        """What ``slices()`` last returned: returned again while no slice changed."""
        self._seen: tuple[list[Obj], list[Obj]] = ([], [])
        """The stored slices and rules ``_served`` was made from."""
        self.pools = PoolCache()
        """The pools per node, shared by the allocators of successive pods."""
        self._claims: dict[str, tuple[Obj, ResourceClaim]] = {}
        """Parsed claims by ``namespace/name``, with the dict they were parsed from."""
        self.pending: dict[str, Pending] = {}
        """In-flight allocations by claim uid."""
        self._assumed: dict[str, Obj] = {}
        """Claims as our own writes returned them, by ``namespace/name``."""
        self._in_use = InUse(self.parse_claim)
        """The devices allocated claims hold, kept up to date from pod to pod."""

    # -- claims ------------------------------------------------------------------------------
    def get_claim(self, namespace: str, name: str) -> Obj | None:
        stored = self._store.get(CLAIM, namespace, name)
        key = f"{namespace}/{name}"
        assumed = self._assumed.get(key)
        if assumed is None:
            return stored
        if stored is None or _rv(stored) >= _rv(assumed):
            # caught up (or deleted): the store is the truth again
            del self._assumed[key]
            return stored
        return assumed

    def pod_group(self, namespace: str, name: str) -> Obj | None:
        """The ``scheduling.k8s.io`` PodGroup ``namespace/name``, as the store holds it."""
        return self._store.get(STORE_KINDS[GangAPI.UPSTREAM], namespace, name)

    def assume(self, claim: Obj) -> None:
        meta = claim.get("metadata") or {}
        self._assumed[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = claim

    def parse_claim(self, raw: Obj) -> ResourceClaim:
        """The parsed claim (kept while the store holds the same dict); ``ObjectError``."""
        key = _ref(raw)
        got = self._claims.get(key)
        if got is not None and got[0] is raw:
            return got[1]
        claim = ResourceClaim.from_dict(raw)
        self._claims[key] = (raw, claim)
        return claim

    def _all_claims(self) -> list[Obj]:
        """Every claim, our assumed copies in place of older stored ones."""
        claims = list(self._store.list(CLAIM))
        newer: dict[int, Obj] = {}
        for key in list(self._assumed):
            ns, _, name = key.partition("/")
            stored = self._store.get(CLAIM, ns, name)
            if stored is None:
                # our writes only update claims the store held: gone from it means deleted
                del self._assumed[key]
                continue
            got = self.get_claim(ns, name)
            if got is not None and got is not stored:
                newer[id(stored)] = got
        if newer:
            claims = [newer.get(id(raw), raw) for raw in claims]
        return claims

    def allocated_state(self) -> AllocatedState:
        """Devices in use: allocated claims (as assumed) plus in-flight allocations."""
        claims = self._all_claims()
        state = self._in_use.state(
            claims, (r for p in self.pending.values() for r in p.allocation.devices)
        )
        if len(self._claims) > len(claims):  # some were deleted: not kept parsed
            live = {_ref(raw) for raw in claims}
            for gone in [k for k in self._claims if k not in live]:
                del self._claims[gone]
        return state

    # -- slices and classes ------------------------------------------------------------------
    def slices(self) -> list[ResourceSlice]:
        """The parsed slices with the rules' taints; the same list object while none of
        them changed (callers must not modify it)."""
        raws = list(self._store.list(SLICE))
        rules = list(self._store.list(TAINT_RULE))
        if raws == self._seen[0] and rules == self._seen[1]:  # identity first: cheap
            return self._served
        out = self._slices_now(raws, rules)
        prev = self._served
        self._seen = (raws, rules)
        if len(out) == len(prev) and all(a is b for a, b in zip(out, prev, strict=True)):
            return prev
        self._served = out
        return out

    def _slices_now(self, raws: list[Obj], rule_raws: list[Obj]) -> list[ResourceSlice]:
        out: list[ResourceSlice] = []
        live: set[str] = set()
        changed = False
        for raw in raws:
            name = str((raw.get("metadata") or {}).get("name") or "")
            live.add(name)
            got = self._slices.get(name)
            if got is None or got[0] is not raw:
                changed = True
                try:
                    parsed: ResourceSlice | None = self._bodies.parse(raw)
                except ObjectError as e:
                    log.warning("ResourceSlice %s ignored: %s", name, e)
                    parsed = None
                got = self._slices[name] = (raw, parsed)
            if got[1] is not None:
                out.append(got[1])
        if len(live) != len(self._slices):
            changed = True
            for gone in set(self._slices) - live:
                del self._slices[gone]
        if changed:
            self._bodies.keep_only(out)
        rules = self.taint_rules(rule_raws)
        if not rules and not self._patched:
            return out
        patched = {}
        for i, sl in enumerate(out):
            mine = tuple(r for r in rules if r.applies_to_slice(sl))
            if not mine:
                continue
            got_p = self._patched.get(sl.name)
            if got_p is None or got_p[0] is not sl or got_p[1] != mine:
                got_p = (sl, mine, patch_slice(sl, mine))
            patched[sl.name] = got_p
            out[i] = got_p[2]
        self._patched = patched
        return out

    def taint_rules(self, raws: Iterable[Obj] | None = None) -> list[DeviceTaintRule]:
        """Every well-formed DeviceTaintRule, in the store's order (a malformed one is
        logged and left out: the API server refuses such rules anyway); ``raws``: the
        store's rules, when the caller has listed them."""
        out: list[DeviceTaintRule] = []
        live: set[str] = set()
        for raw in self._store.list(TAINT_RULE) if raws is None else raws:
            name = str((raw.get("metadata") or {}).get("name") or "")
            live.add(name)
            got = self._rules.get(name)
            if got is None or got[0] is not raw:
                try:
                    parsed: DeviceTaintRule | None = DeviceTaintRule.from_dict(raw)
                except ObjectError as e:
                    log.warning("DeviceTaintRule %s ignored: %s", name, e)
                    parsed = None
                got = self._rules[name] = (raw, parsed)
            if got[1] is not None:
                out.append(got[1])
        for gone in set(self._rules) - live:
            del self._rules[gone]
        return out

    def device_class(self, name: str) -> DeviceClass | None:
        """The parsed class; None when missing. ``ObjectError`` when malformed."""
        raw = self._store.get(CLASS, "", name)
        if raw is None:
            self._classes.pop(name, None)
            return None
        got = self._classes.get(name)
        if got is None or got[0] is not raw:
            got = self._classes[name] = (raw, DeviceClass.from_dict(raw))
        return got[1]

    def classes(self) -> dict[str, DeviceClass]:
        out: dict[str, DeviceClass] = {}
        for raw in self._store.list(CLASS):
            name = str((raw.get("metadata") or {}).get("name") or "")
            try:
                cls = self.device_class(name)
            except ObjectError as e:
                log.warning("DeviceClass %s ignored: %s", name, e)
                continue
            if cls is not None:
                out[name] = cls
        return out


def _ref(raw: Obj) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


_TRACKERS: dict[int, tuple[weakref.ref[Any], ClaimTracker]] = {}


def tracker_for(store: ObjectStore) -> ClaimTracker:
    """The tracker shared by every plugin instance (every profile) reading ``store``
    (by identity: stores are not necessarily hashable)."""
    key = id(store)
    got = _TRACKERS.get(key)
    if got is not None and got[0]() is store:
        return got[1]
    tracker = ClaimTracker(store)
    table = _TRACKERS  # bound now: module globals may be gone when a store dies at exit

    def forget(_: Any) -> None:
        table.pop(key, None)

    try:
        ref = weakref.ref(store, forget)
    except TypeError:  # cannot be weakly referenced: one tracker per plugin
        return tracker
    _TRACKERS[key] = (ref, tracker)
    return tracker
