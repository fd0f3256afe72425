"""ResourceSlices that differ only in their name, pool and node share one parsed body.

A driver publishes the same devices on every node of a kind (scheduler_perf's DRA
workloads: one slice of 8 identical devices per node): parsing each took about 1.5 ms,
so 1000 nodes cost 1.5 s before the first pod could be placed, 12 MiB of parsed
structures, and every device's CEL selectors were evaluated once per node. Here a slice's
spec, but for ``pool`` and ``nodeName`` (whether it is set is kept), is hashed; a slice
whose hash was seen reuses that slice's parsed devices, counters and node selection
(``ResourceSlice.with_header``) and only its name, pool and node are read. The devices
being the same objects, their CEL outcomes (kept on them) are shared too, and
:mod:`.outcomes` takes equal device lists for equal devices.

A changed slice has another hash and is parsed again (the shared body of the others is
not touched: parsed devices are never modified). Bodies no slice uses any more are
dropped by ``keep_only``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from kubesched.framework.dra.types import ResourceSlice

__all__ = ["SliceBodies", "body_digest"]

_PER_SLICE = ("pool", "nodeName")


def body_digest(raw: Mapping[str, Any]) -> bytes | None:
    """The hash of the slice's spec but for pool and node name (a slice's own fields);
    None when the spec cannot be serialised (it is then parsed on its own)."""
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return None
    rest = {k: v for k, v in spec.items() if k not in _PER_SLICE}
    try:
        data = orjson.dumps(rest)
    except TypeError:
        return None
    prefix = b"N" if spec.get("nodeName") else b"-"
    return hashlib.blake2b(prefix + data, digest_size=16).digest()


class SliceBodies:
    """Parsed slice bodies by digest."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, ResourceSlice] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def parse(self, raw: Mapping[str, Any]) -> ResourceSlice:
        """``ResourceSlice.from_dict(raw)``, sharing the body of an earlier slice with
        the same digest; raises ``ObjectError`` as it does (a malformed slice is not
        kept)."""
        digest = body_digest(raw)
        if digest is None:
            return ResourceSlice.from_dict(raw)
        body = self._by_digest.get(digest)
        if body is not None:
            return body.with_header(raw)
        parsed = ResourceSlice.from_dict(raw)
        self._by_digest[digest] = parsed
        return parsed

    def keep_only(self, live: Iterable[ResourceSlice]) -> None:
        """Forget the bodies none of ``live`` shares."""
        used = {id(s.devices) for s in live}
        self._by_digest = {d: b for d, b in self._by_digest.items() if id(b.devices) in used}
