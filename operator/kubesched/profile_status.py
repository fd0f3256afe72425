"""Reconciling SchedulingProfiles: spec -> compiled profile + status, and which profile
serves which schedulerName. Pure logic under the operator layer (no kopf, no I/O); the
Kopf handlers and ``kubesched validate`` call it, so both say the same thing.

- :func:`reconcile` validates and compiles one spec and computes its status: a KEP-1623
  ``Ready`` condition (reasons :data:`REASONS`), ``observedGeneration``,
  ``activeGeneration`` (the generation whose chain actually serves; unchanged when an
  update is refused, and the message says the last good chain keeps serving) and the
  serving chain per extension point.
- :class:`ProfileBook` is the bookkeeping around it: the built-in default profile
  (kube-scheduler's defaults under ``kubesched``) that a SchedulingProfile with the same
  schedulerName overrides and that comes back when that profile is deleted; one serving
  profile per schedulerName (a second one is refused with ``SchedulerNameConflict``);
  deleting any other profile stops scheduling for its schedulerName (its pods stay
  pending, untouched). It drives a :class:`ProfileSink` (the Scheduler).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import pydantic

from kubesched.api.meta import rfc3339
from kubesched.api.profile import DEFAULT_SCHEDULER_NAME, ProfileSpec
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import FrameworkServices
from kubesched.profiles import CompiledProfile, ProfileError, compile_profile

__all__ = [
    "COMPILED",
    "INVALID_ARGS",
    "INVALID_PLUGIN",
    "INVALID_SPEC",
    "REASONS",
    "SCHEDULER_NAME_CONFLICT",
    "ProfileBook",
    "ProfileSink",
    "Served",
    "pydantic_message",
    "pydantic_messages",
    "reconcile",
    "validate_spec",
]

COMPILED = "Compiled"
"""Ready=True: the spec compiled and its chain serves."""
INVALID_PLUGIN = "InvalidPlugin"
"""Unknown plugin, a plugin at a point it does not implement, two QueueSort plugins, ..."""
INVALID_ARGS = "InvalidArgs"
"""A plugin's args do not validate; the message names the field."""
INVALID_SPEC = "InvalidSpec"
"""The spec itself does not validate (what the CRD schema and CEL rules also refuse)."""
SCHEDULER_NAME_CONFLICT = "SchedulerNameConflict"
"""Another SchedulingProfile already serves this schedulerName."""
REASONS = (COMPILED, INVALID_PLUGIN, INVALID_ARGS, INVALID_SPEC, SCHEDULER_NAME_CONFLICT)


def pydantic_message(err: pydantic.ValidationError, prefix: str = "") -> str:
    """The first error as ``path: message`` (aliases, ``[i]`` for list indices)."""
    return pydantic_messages(err, prefix)[0]


def pydantic_messages(err: pydantic.ValidationError, prefix: str = "") -> list[str]:
    """Every error as ``path: message`` (``kubesched validate`` reports them all)."""
    out: list[str] = []
    for e in err.errors():
        path = prefix
        extra = (e.get("ctx") or {}).get("path")
        for part in e["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        if isinstance(extra, str) and extra:
            path += extra if extra.startswith("[") else (f".{extra}" if path else extra)
        msg = str(e["msg"]).removeprefix("Value error, ")
        out.append(f"{path}: {msg}" if path else msg)
    return out


def validate_spec(
    spec: Mapping[str, Any] | None,
    services: FrameworkServices | None = None,
    registry: Registry | None = None,
) -> CompiledProfile:
    """Parse and compile a SchedulingProfile spec; raises :class:`ProfileError` whose
    message starts with the field path inside the spec (as in a KubeSchedulerConfiguration
    profile, e.g. ``pluginConfig[0].args.scoringStrategy.type: ...``)."""
    try:
        parsed = ProfileSpec.model_validate(dict(spec or {}))
    except pydantic.ValidationError as e:
        raise ProfileError(INVALID_SPEC, pydantic_message(e)) from None
    return compile_profile(parsed, services, registry)


@dataclass(frozen=True, slots=True)
class Served:
    """A profile's chain that serves, and the generation of the spec it came from."""

    generation: int
    profile: CompiledProfile


def _now() -> str:
    return rfc3339(datetime.now(UTC))


def _ready(
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    previous: Mapping[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    status = "True" if ok else "False"
    since = now
    for c in (previous or {}).get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == status and c.get("lastTransitionTime"):
            since = c["lastTransitionTime"]
    return {
        "type": "Ready",
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def reconcile(
    spec: Mapping[str, Any] | None,
    generation: int,
    serving: Mapping[str, str],
    last_good: Served | None,
    *,
    name: str = "",
    previous_status: Mapping[str, Any] | None = None,
    services: FrameworkServices | None = None,
    registry: Registry | None = None,
    now: Callable[[], str] = _now,
) -> tuple[CompiledProfile | None, dict[str, Any]]:
    """Validate and compile ``spec`` (generation ``generation``) of SchedulingProfile
    ``name``; returns the profile to swap in (None if invalid) and the status to write.

    ``serving`` maps each schedulerName to the SchedulingProfile that serves it now (the
    built-in default profile is not in it: a profile may always override it);
    ``last_good`` is what this profile served before, if anything.
    ``previous_status`` keeps ``lastTransitionTime`` while the Ready status holds.
    """
    compiled: CompiledProfile | None = None
    try:
        compiled = validate_spec(spec, services, registry)
        owner = serving.get(compiled.scheduler_name)
        if owner is not None and owner != name:
            raise ProfileError(
                SCHEDULER_NAME_CONFLICT,
                f"schedulerName: {compiled.scheduler_name!r} is already served by "
                f"SchedulingProfile {owner!r}",
            )
    except ProfileError as e:
        compiled = None
        reason, message = e.reason, e.message
    if compiled is not None:
        ok, reason = True, COMPILED
        active: Served | None = Served(generation, compiled)
        message = f"generation {generation} serves schedulerName {compiled.scheduler_name!r}"
    else:
        ok, active = False, last_good
        if last_good is not None:
            message += (
                f"; the last good chain (generation {last_good.generation}) keeps serving "
                f"schedulerName {last_good.profile.scheduler_name!r}"
            )
        else:
            message += "; nothing is served by this profile"
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "activeGeneration": active.generation if active is not None else None,
        "schedulerName": active.profile.scheduler_name if active is not None else None,
        "conditions": [_ready(ok, reason, message, generation, previous_status, now())],
        "activePlugins": (active.profile.framework.chain.names() if active is not None else None),
    }
    return compiled, status


# -- which profile serves which schedulerName --------------------------------------------------


class ProfileSink(Protocol):
    """What :class:`ProfileBook` drives: the Scheduler."""

    def set_profile(self, profile: CompiledProfile) -> None: ...

    def remove_profile(self, name: str) -> None: ...

    def services(self) -> FrameworkServices: ...


@dataclass
class ProfileBook:
    """The SchedulingProfiles known to one scheduler and what each serves.

    Calls come one at a time, on the loop thread, between scheduling cycles (Kopf
    handlers run on the operator's loop); each call leaves the sink consistent.
    """

    sink: ProfileSink
    registry: Registry | None = None
    builtin_name: str = DEFAULT_SCHEDULER_NAME
    served: dict[str, Served] = field(default_factory=dict)
    """SchedulingProfile name -> what it serves now."""
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)

    def serving(self) -> dict[str, str]:
        """schedulerName -> the SchedulingProfile serving it (the built-in one excluded)."""
        return {s.profile.scheduler_name: name for name, s in self.served.items()}

    def apply(
        self,
        name: str,
        spec: Mapping[str, Any] | None,
        generation: int,
        previous_status: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A SchedulingProfile was created, changed or resumed: swap in its chain if it
        is valid; returns its new status."""
        last = self.served.get(name)
        compiled, status = reconcile(
            spec,
            generation,
            self.serving(),
            last,
            name=name,
            previous_status=previous_status or self.statuses.get(name),
            services=self.sink.services(),
            registry=self.registry,
        )
        if compiled is not None:
            if last is not None and last.profile.scheduler_name != compiled.scheduler_name:
                self._release(last.profile.scheduler_name)
            self.served[name] = Served(generation, compiled)
            self.sink.set_profile(compiled)
        self.statuses[name] = status
        return status

    def delete(self, name: str) -> None:
        """A SchedulingProfile was deleted: its schedulerName falls back to the built-in
        profile if it is ``kubesched``, else stops being scheduled."""
        self.statuses.pop(name, None)
        last = self.served.pop(name, None)
        if last is not None:
            self._release(last.profile.scheduler_name)

    def conflicting(self) -> list[str]:
        """Profiles refused with SchedulerNameConflict: the handlers re-apply them after
        a profile is deleted or changes its schedulerName (one of them may serve now)."""
        return [
            name
            for name, status in self.statuses.items()
            if name not in self.served
            and (status.get("conditions") or [{}])[0].get("reason") == SCHEDULER_NAME_CONFLICT
        ]

    def _release(self, scheduler_name: str) -> None:
        if scheduler_name == self.builtin_name:
            self.sink.set_profile(self.builtin())
        else:
            self.sink.remove_profile(scheduler_name)

    def builtin(self) -> CompiledProfile:
        """kube-scheduler's default profile under ``builtin_name``."""
        return compile_profile(
            ProfileSpec(scheduler_name=self.builtin_name), self.sink.services(), self.registry
        )
