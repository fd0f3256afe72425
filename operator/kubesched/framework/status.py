"""Status codes and the Status a plugin returns, with kube-scheduler's meanings.

A plugin returns ``None`` for Success (cheap on the hot path); any other outcome is a
:class:`Status`. What each code does to the pod is what kube-scheduler does.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Collection

__all__ = [
    "Code",
    "OutsideFrameworkError",
    "Status",
    "distinct",
    "plugin_error",
    "reason_counts",
    "wrap_error",
]


class Code(enum.IntEnum):
    SUCCESS = 0
    """The plugin ran and the pod may go on. Plugins usually return ``None`` instead."""
    ERROR = 1
    """An internal failure. The pod is requeued with backoff; preemption is not tried;
    the pod condition reason is ``SchedulerError``."""
    UNSCHEDULABLE = 2
    """The pod does not fit now. From Filter: the node is a preemption candidate (removing
    lower-priority pods might help). The pod goes to the unschedulable pool and returns
    on a cluster event its rejecting plugins registered for."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """The pod does not fit and preemption on this node cannot help (e.g. node selector
    mismatch). From PreFilter it rejects every node at once."""
    WAIT = 4
    """Only from Permit: hold the pod, reserved, until allowed, rejected or timed out."""
    SKIP = 5
    """From PreFilter/PreScore: this plugin's Filter/Score is skipped for this pod.
    From Bind: this binder declines; the next Bind plugin is asked."""
    PENDING = 6
    """The pod waits for something outside the scheduler (e.g. a PodGroup to exist).
    Like Unschedulable, but it is not counted as a scheduling failure by preemption."""


class Status:
    """A non-success outcome: a code, human-readable reasons, the plugin that said it."""

    __slots__ = ("code", "error", "plugin", "reasons")

    def __init__(
        self,
        code: Code,
        *reasons: str,
        plugin: str = "",
        error: BaseException | None = None,
    ) -> None:
        self.code = code
        self.reasons: tuple[str, ...] = reasons
        self.plugin = plugin
        self.error = error

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE, *reasons, plugin=plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin=plugin)

    @classmethod
    def as_error(cls, error: BaseException | str, plugin: str = "") -> Status:
        if isinstance(error, BaseException):
            return cls(Code.ERROR, str(error) or type(error).__name__, plugin=plugin, error=error)
        return cls(Code.ERROR, error, plugin=plugin)

    @classmethod
    def skip(cls) -> Status:
        return _SKIP

    @classmethod
    def wait(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.WAIT, *reasons, plugin=plugin)

    # -- predicates --------------------------------------------------------------------
    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending."""
        return self.code in (
            Code.UNSCHEDULABLE,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            Code.PENDING,
        )

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        if self.plugin == plugin or self is _SKIP:
            return self
        return Status(self.code, *self.reasons, plugin=plugin, error=self.error)

    def __repr__(self) -> str:
        who = f" plugin={self.plugin}" if self.plugin else ""
        return f"<Status {self.code.name}{who}: {self.message()!r}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, self.reasons, self.plugin))


_SKIP = Status(Code.SKIP)


class OutsideFrameworkError(Exception):
    """An error a plugin reports for a check kube-scheduler makes outside its framework
    (a pod group's validation, before its cycle): passed on as it is, never worded as
    the plugin's (:func:`wrap_error`)."""


def wrap_error(prefix: str, s: Status, plugin: str) -> Status:
    """``s`` (a plugin's error, or any status its extension point does not expect) as
    the Error status kube-scheduler's framework makes of it: the message reads
    ``<prefix>: <s's message>`` (``running PreFilter plugin "X": ...``, ``running "X"
    filter plugin: ...``, ...), the error object is kept. An
    :class:`OutsideFrameworkError` keeps its own words."""
    if isinstance(s.error, OutsideFrameworkError):
        return s.with_plugin(plugin)
    return Status(Code.ERROR, f"{prefix}: {s.message()}", plugin=plugin, error=s.error)


def plugin_error(point: str, plugin: str, s: Status) -> Status:
    """:func:`wrap_error` in the words most extension points share: ``running PreFilter
    plugin "X": <error>`` (PreFilter, PreScore, Reserve, Permit, PreBind, Bind)."""
    return wrap_error(f'running {point} plugin "{plugin}"', s, plugin)


def distinct(statuses: Collection[Status]) -> list[Status]:
    """Each status object once. Many nodes share one Status (a PreFilter rejection, a
    vector diagnosis), so this is a few objects for thousands of nodes; by identity
    and in C, without hashing each status."""
    return list(dict(zip(map(id, statuses), statuses, strict=True)).values())


def reason_counts(statuses: Collection[Status]) -> dict[str, int]:
    """How many of ``statuses`` give each reason (a FitError's message counts nodes)."""
    times = Counter(map(id, statuses))
    counts: dict[str, int] = {}
    for st in distinct(statuses):
        for r in st.reasons:
            counts[r] = counts.get(r, 0) + times[id(st)]
    return counts
