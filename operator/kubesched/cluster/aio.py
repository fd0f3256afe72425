"""aiohttp, off ``kubesched run``'s way to its first bind.

The binds and Events go through :mod:`~kubesched.cluster.lean_http` and the first LIST of
every kind through :mod:`~kubesched.cluster.prefetch`; aiohttp serves the watches, the
other LISTs and reads, a proxy, Kopf and the HTTP endpoints, none of which the first bind
waits for. Its import (with its dependencies about 60 ms of CPU, and its two default TLS
contexts loading the system's CA bundle) therefore waits for the first request that needs
it (:meth:`KubeHTTP.open <kubesched.cluster.kube_http.KubeHTTP.open>`), which
:func:`imported` makes in a worker thread: the event loop schedules on meanwhile, and the
bundles load without the GIL. In ``kubesched run`` that is the watches, which open once
the first bind is out (``operator/run.py``, ``watches_open``).
"""

from __future__ import annotations

import asyncio
import importlib
import sys

__all__ = ["errors", "imported"]

_IMPORTED = [False]


async def imported() -> None:
    """Once aiohttp is imported (in a worker thread the first time; at once after)."""
    if not _IMPORTED[0]:
        await asyncio.to_thread(importlib.import_module, "aiohttp")
        _IMPORTED[0] = True


def errors(*also: type[Exception]) -> tuple[type[Exception], ...]:
    """``also``, and aiohttp's ``ClientError`` once aiohttp is imported: for an ``except``
    that must not import it (nothing raised one before it was imported)."""
    error = getattr(sys.modules.get("aiohttp"), "ClientError", None)
    return (*also, error) if error is not None else also
