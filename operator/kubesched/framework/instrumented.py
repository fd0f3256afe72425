"""Plugins wrapped once, when their profile is compiled, so that a sampled scheduling
cycle times each plugin call (kube-scheduler's per-plugin execution duration).

:func:`instrument_chain` builds a second chain of the same plugins, each behind a
stopwatch; the :class:`~kubesched.framework.runtime.Framework` keeps both and runs the
wrapped one only in sampled cycles (:class:`~kubesched.framework.cycle_state.CycleState`'s ``record_plugin_metrics``,
drawn by the scheduler per cycle; clones made by preemption keep it). So a wrapped
method always times its call, and an unsampled cycle, whose Filter calls in
preemption's dry run can number tens of thousands, never reaches a wrapper. The
recording itself is a callback, so ``framework/`` stays free of Prometheus. A
vectorised Filter or Score (``filter_mask``/``score_vector``, one call for all nodes)
counts as that plugin's execution at that extension point. QueueSort, PreEnqueue,
PreFilter extensions (AddPod/RemovePod) and the binding cycle's plugins (PreBind, Bind,
PostBind) are not wrapped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar, cast

from kubesched.framework.runtime import PluginChain
from kubesched.framework.status import Code, Status

__all__ = ["PluginRecorder", "instrument_chain"]

_P = TypeVar("_P")

PluginRecorder = Callable[[str, str, Status | None, float], None]
"""``(plugin, extension_point, status, seconds)`` for one timed plugin call."""

# Plugin method -> kube-scheduler's extension_point label. Vector variants count as the
# plugin's Filter/Score execution.
_TIMED_METHODS = {
    "pre_filter": "PreFilter",
    "filter": "Filter",
    "filter_mask": "Filter",
    "post_filter": "PostFilter",
    "pre_score": "PreScore",
    "score": "Score",
    "score_vector": "Score",
    "normalize_score": "ScoreExtensionNormalize",
    "reserve": "Reserve",
    "unreserve": "Unreserve",
    "permit": "Permit",
}


def _result_status(result: object) -> Status | None:
    if isinstance(result, Status):
        return result
    if isinstance(result, tuple):
        for x in result:
            if isinstance(x, Status):
                return x
    return None


class InstrumentedPlugin:
    """A plugin with a stopwatch on its scheduling-cycle methods (the framework calls it
    in sampled cycles only); everything else (name, args, extensions, async binding methods,
    ``isinstance``, attribute writes) passes through to the plugin."""

    _plugin: object
    _record: PluginRecorder
    name: str

    def __init__(self, plugin: object, record: PluginRecorder) -> None:
        object.__setattr__(self, "_plugin", plugin)
        object.__setattr__(self, "_record", record)
        object.__setattr__(self, "name", getattr(plugin, "name"))  # noqa: B009

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # ``isinstance(wrapped, TheirPluginClass)`` holds, as for the plugin itself.
        return type(self._plugin)

    def __setattr__(self, attr: str, value: object) -> None:
        setattr(self._plugin, attr, value)
        self.__dict__.pop(attr, None)  # a wrapper of the replaced method is stale

    def __getattr__(self, attr: str) -> object:
        value = getattr(self._plugin, attr)
        point = _TIMED_METHODS.get(attr)
        if point is None or not callable(value):
            return value
        method: Callable[..., object] = value
        name, record, perf = self.name, self._record, time.perf_counter

        def timed(*args: object, **kwargs: object) -> object:
            t0 = perf()
            try:
                result = method(*args, **kwargs)
            except BaseException:
                record(name, point, Status(Code.ERROR), perf() - t0)
                raise
            record(name, point, _result_status(result), perf() - t0)
            return result

        self.__dict__[attr] = timed  # cache: later lookups skip __getattr__
        return timed


def instrument_chain(chain: PluginChain, record: PluginRecorder) -> PluginChain:
    """The same chain with its scheduling-cycle plugins wrapped (one wrapper per plugin,
    whatever the number of points it serves); ``chain`` itself is left plain."""
    wrappers: dict[int, InstrumentedPlugin] = {}

    def w(p: _P) -> _P:
        # the wrapper passes for the plugin (its class, its methods): typed as the plugin
        if isinstance(p, InstrumentedPlugin):
            return p
        wrapper = wrappers.get(id(p))
        if wrapper is None:
            wrapper = wrappers[id(p)] = InstrumentedPlugin(p, record)
        return cast(_P, wrapper)

    return PluginChain(
        queue_sort=chain.queue_sort,
        pre_enqueue=chain.pre_enqueue,
        pre_filter=[w(p) for p in chain.pre_filter],
        filter=[w(p) for p in chain.filter],
        post_filter=[w(p) for p in chain.post_filter],
        pre_score=[w(p) for p in chain.pre_score],
        score=[(w(p), weight) for p, weight in chain.score],
        reserve=[w(p) for p in chain.reserve],
        permit=[w(p) for p in chain.permit],
        pre_bind=chain.pre_bind,
        bind=chain.bind,
        post_bind=chain.post_bind,
    )
