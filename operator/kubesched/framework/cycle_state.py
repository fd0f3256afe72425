"""CycleState: data plugins share within one scheduling cycle of one pod."""

from __future__ import annotations

from typing import Generic, TypeVar, cast

__all__ = ["CycleState", "StateKey"]

T = TypeVar("T")


class StateKey(str, Generic[T]):
    """A CycleState key that carries the type of its value, so that mypy checks a
    plugin reads back what it wrote: ``KEY: StateKey[Resource] = StateKey("PreFilterX")``.
    At run time it is the string itself."""

    __slots__ = ()


class CycleState:
    """A per-cycle key/value store.

    Values that have a ``clone()`` method are cloned by :meth:`clone` (preemption runs
    what-if filters on a copy); other values are shared and must be treated as read-only.
    """

    __slots__ = ("_data", "record_plugin_metrics", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, object] = {}
        self.skip_filter_plugins: set[str] = set()
        """Plugins whose PreFilter returned Skip: their Filter is not run this cycle."""
        self.skip_score_plugins: set[str] = set()
        """Plugins whose PreScore returned Skip: their Score is not run this cycle."""
        self.record_plugin_metrics = False
        """A sampled cycle: the framework runs its instrumented plugins, which time their
        calls (:mod:`kubesched.framework.instrumented`); clones keep it."""

    def read(self, key: StateKey[T]) -> T:
        """The value under ``key``; ``KeyError`` if a plugin did not write it."""
        # Only write() stores under a StateKey[T], with a T.
        return cast(T, self._data[key])

    def get(self, key: StateKey[T]) -> T | None:
        """The value under ``key``, None if no plugin wrote it."""
        return cast("T | None", self._data.get(key))

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        c = CycleState()
        for k, v in self._data.items():
            cl = getattr(v, "clone", None)
            c._data[k] = cl() if callable(cl) else v
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.record_plugin_metrics = self.record_plugin_metrics
        return c
