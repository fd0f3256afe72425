"""What allocation reads besides slices and claims: devices in use, claim constraints,
device taints (structured allocator, incubating variant)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kubesched.framework.dra.types import Device, DeviceResult, ExactRequest, ResourceClaim

__all__ = ["AllocatedState", "Constraint", "DeviceID", "taint_prevents"]

DeviceID = tuple[str, str, str]  # driver, pool, device
_NONE_USED: frozenset[str] = frozenset()


@dataclass(slots=True)
class AllocatedState:
    """Devices in use: by allocated claims and in-flight allocations."""

    devices: set[DeviceID] = field(default_factory=set)
    shared_ids: set[tuple[DeviceID, str]] = field(default_factory=set)
    aggregated_capacity: dict[DeviceID, dict[str, Fraction]] = field(default_factory=dict)
    _by_pool: dict[tuple[str, str], frozenset[str] | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def add_result(self, r: DeviceResult) -> None:
        """One allocated device (admin access ones do not count, as in kube)."""
        self._by_pool = None
        if r.admin_access:
            return
        did = (r.driver, r.pool, r.device)
        if r.share_id is None:
            self.devices.add(did)
            return
        self.shared_ids.add((did, r.share_id))
        if r.consumed_capacity:
            agg = self.aggregated_capacity.setdefault(did, {})
            for k, v in r.consumed_capacity.items():
                agg[k] = agg.get(k, Fraction(0)) + v

    @classmethod
    def from_claims(cls, claims: Sequence[ResourceClaim]) -> AllocatedState:
        st = cls()
        for c in claims:
            if c.allocation is not None:
                for r in c.allocation.devices:
                    st.add_result(r)
        return st

    def pools_use(self, keys: Sequence[tuple[str, str]]) -> object | None:
        """What is in use of the pools ``keys`` ((driver, pool) each), comparable between
        nodes: the names of their devices in use; None when some of them are shared by
        claims that consume capacity (what is left of such a device is not a name)."""
        index = self._by_pool
        if index is None:
            index = self._by_pool = self._index_by_pool()
        if not index:
            return ()
        if len(keys) == 1:
            return index.get(keys[0], _NONE_USED)
        used = tuple(index.get(k, _NONE_USED) for k in keys)
        return None if None in used else used

    def _index_by_pool(self) -> dict[tuple[str, str], frozenset[str] | None]:
        names: dict[tuple[str, str], set[str]] = {}
        for d, p, n in self.devices:
            names.setdefault((d, p), set()).add(n)
        index: dict[tuple[str, str], frozenset[str] | None] = {
            k: frozenset(v) for k, v in names.items()
        }
        for (d, p, _), _share in self.shared_ids:
            index[(d, p)] = None
        for d, p, _ in self.aggregated_capacity:
            index[(d, p)] = None
        return index

    @classmethod
    def from_base(
        cls,
        devices: set[DeviceID],
        by_pool: Mapping[tuple[str, str], frozenset[str]],
        extra: Iterable[DeviceResult],
    ) -> AllocatedState:
        """``devices`` in use (``by_pool``: their names by (driver, pool), as its owner
        keeps them) plus ``extra`` results, without indexing ``devices`` again."""
        st = cls(devices=devices)
        index: dict[tuple[str, str], frozenset[str] | None] = dict(by_pool)
        for r in extra:
            st.add_result(r)
            if r.admin_access:
                continue
            key = (r.driver, r.pool)
            if r.share_id is not None:
                index[key] = None
            elif (cur := index.get(key, _NONE_USED)) is not None:
                index[key] = cur | {r.device}
        st._by_pool = index
        return st

    def is_allocated(self, did: DeviceID) -> bool:
        return (
            did in self.devices
            or did in self.aggregated_capacity
            or any(s[0] == did for s in self.shared_ids)
        )


class Constraint:
    """matchAttribute (one value for all) or distinctAttribute (no value twice),
    over the devices of the requests it names (all when none are named)."""

    __slots__ = ("attr", "distinct", "names", "values")

    def __init__(self, names: tuple[str, ...], attr: str, distinct: bool) -> None:
        self.names = frozenset(names)
        self.attr = attr
        self.distinct = distinct
        self.values: list[tuple[str, object]] = []

    def applies(self, req: str, sub: str) -> bool:
        if not self.names:
            return True
        return req in self.names or (bool(sub) and f"{req}/{sub}" in self.names)

    def add(self, req: str, sub: str, dev: Device, did: DeviceID) -> bool:
        if not self.applies(req, sub):
            return True
        a = lookup_attribute(dev, did, self.attr)
        if a is None:
            return False
        if self.distinct:
            if a in self.values:
                return False
        elif self.values and self.values[0] != a:
            return False
        self.values.append(a)
        return True

    def remove(self, req: str, sub: str) -> None:
        if self.applies(req, sub):
            self.values.pop()


def lookup_attribute(dev: Device, did: DeviceID, name: str) -> tuple[str, object] | None:
    a = dev.attributes.get(name)
    if a is None:
        domain, sep, ident = name.partition("/")
        if not sep or domain != did[0]:
            return None
        a = dev.attributes.get(ident)
        if a is None:
            return None
    return (a.kind, a.value)


def taint_prevents(dev: Device, req: ExactRequest) -> bool:
    return any(
        t.effect in ("NoSchedule", "NoExecute")
        and not any(tl.tolerates(t) for tl in req.tolerations)
        for t in dev.taints
    )
