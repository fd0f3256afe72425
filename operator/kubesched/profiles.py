"""Compiling a profile spec into a live Framework, with kube-scheduler's semantics.

1. The spec's plugin sets are merged onto the default plugins (v1 ``mergePlugins``):
   a default re-enabled by the user is replaced in place (keeping its position),
   ``disabled`` removes defaults (``*`` removes all), other user plugins are appended.
2. ``multiPoint`` plugins are expanded to every extension point they implement, except
   where disabled; a plugin also enabled at a specific point is taken from there
   (override), and order is: overrides, multiPoint, other specific plugins.
3. Score weights: the specific ``score`` weight wins over multiPoint's; 0 or unset is 1.

Errors raise :class:`ProfileError` with a reason (``InvalidPlugin``, ``InvalidArgs``)
and a message that names the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from kubesched.api.profile import (
    EXTENSION_POINT_FIELDS,
    PluginRef,
    Plugins,
    PluginSet,
    ProfileSpec,
)
from kubesched.framework.implements import implements
from kubesched.framework.instrumented import instrument_chain
from kubesched.framework.interface import (
    EXTENSION_POINTS,
    ActionType,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework, FrameworkServices, PluginChain
from kubesched.plugins import DEFAULT_PLUGINS, in_tree_registry

__all__ = [
    "CompiledProfile",
    "ProfileError",
    "compile_profile",
    "default_profile_spec",
    "default_registry",
]


class ProfileError(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(slots=True)
class CompiledProfile:
    spec: ProfileSpec
    framework: Framework

    @property
    def scheduler_name(self) -> str:
        return self.spec.scheduler_name


def default_registry() -> Registry:
    """In-tree plugins plus out-of-tree ones from the ``kubesched.plugins`` entry points,
    loaded when a name not in-tree is first asked for (``Registry.defer_entry_points``).
    A broken out-of-tree plugin is logged and left out; it cannot stop the scheduler."""
    registry = in_tree_registry()
    registry.defer_entry_points()
    return registry


def default_profile_spec(scheduler_name: str = "kubesched") -> ProfileSpec:
    return ProfileSpec(scheduler_name=scheduler_name)


def _default_plugins() -> Plugins:
    return Plugins(
        multi_point=PluginSet(enabled=[PluginRef(name=n, weight=w) for n, w in DEFAULT_PLUGINS])
    )


def _merge_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    disabled = [PluginRef(name=p.name) for p in custom.disabled] + [
        PluginRef(name=p.name) for p in default.disabled
    ]
    disabled_names = {p.name for p in disabled}
    custom_index = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for p in default.enabled:
            if p.name in disabled_names:
                continue
            i = custom_index.get(p.name)
            if i is not None:
                p = custom.enabled[i]
                replaced.add(i)
            enabled.append(p)
    enabled += [p for i, p in enumerate(custom.enabled) if i not in replaced]
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_with_defaults(plugins: Plugins) -> Plugins:
    defaults = _default_plugins()
    merged: dict[str, PluginSet] = {}
    for field in Plugins.model_fields:
        merged[field] = _merge_set(getattr(defaults, field), getattr(plugins, field))
    return Plugins(**merged)


def compile_profile(
    spec: ProfileSpec,
    services: FrameworkServices | None = None,
    registry: Registry | None = None,
) -> CompiledProfile:
    registry = registry or default_registry()
    plugins = merge_with_defaults(spec.plugins)
    fwk = Framework(
        spec.scheduler_name,
        services,
        percentage_of_nodes_to_score=spec.percentage_of_nodes_to_score,
    )
    instances = _Instances(registry, _plugin_args(spec, registry), fwk)
    mp = plugins.multi_point
    # Name the user's entry, not its index in the list merged with the defaults.
    user_mp = {p.name: j for j, p in enumerate(spec.plugins.multi_point.enabled)}
    for p in mp.enabled:
        j = user_mp.get(p.name)
        instances.get(
            p.name,
            f"plugins.multiPoint.enabled[{j}].name" if j is not None else "default plugins",
        )
    resolved: dict[str, list[Plugin]] = {}
    weights: dict[str, int | None] = {}
    for point, attr in EXTENSION_POINT_FIELDS.items():
        resolved[point] = _resolve_point(point, getattr(plugins, attr), mp, instances, weights)
    mp_weights = {p.name: p.weight for p in mp.enabled}
    chain = _assemble_chain(resolved, weights, mp_weights, instances)
    record = fwk.services.record_plugin
    timed = None if record is None else instrument_chain(chain, record)
    fwk.set_chain(chain, _registered_events(instances.built), timed=timed)
    return CompiledProfile(spec, fwk)


def _plugin_args(spec: ProfileSpec, registry: Registry) -> dict[str, tuple[int, dict[str, Any]]]:
    """``pluginConfig`` by plugin name, with each entry's index (for messages)."""
    args_by_name: dict[str, tuple[int, dict[str, Any]]] = {}
    for i, pc in enumerate(spec.plugin_config):
        if pc.name in args_by_name:
            raise ProfileError(
                "InvalidArgs", f"pluginConfig[{i}].name: duplicate config for {pc.name!r}"
            )
        if pc.name not in registry:
            raise ProfileError(
                "InvalidPlugin", f"pluginConfig[{i}].name: unknown plugin {pc.name!r}"
            )
        args_by_name[pc.name] = (i, pc.args)
    return args_by_name


class _Instances:
    """Every plugin named in an enabled list is instantiated once, with its decoded args;
    ``built`` keeps them in the order they were first named."""

    def __init__(
        self,
        registry: Registry,
        args_by_name: dict[str, tuple[int, dict[str, Any]]],
        fwk: Framework,
    ) -> None:
        self.registry = registry
        self.args_by_name = args_by_name
        self.fwk = fwk
        self.built: dict[str, Plugin] = {}

    def get(self, name: str, where: str) -> Plugin:
        """The plugin ``name``; ``where`` is the field that named it, for messages."""
        if name in self.built:
            return self.built[name]
        plug_spec = self.registry.get(name)
        if plug_spec is None:
            known = ", ".join(self.registry.names())
            raise ProfileError(
                "InvalidPlugin", f"{where}: unknown plugin {name!r} (known: {known})"
            )
        idx, raw = self.args_by_name.get(name, (-1, {}))
        try:
            args = plug_spec.parse_args(raw)
        except pydantic.ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"])
            field = f"pluginConfig[{idx}].args" if idx >= 0 else f"args of {name}"
            raise ProfileError(
                "InvalidArgs", f"{field}{'.' + loc if loc else ''}: {err['msg']}"
            ) from None
        try:
            obj = plug_spec.factory(args, self.fwk)
        except (ValueError, TypeError) as e:
            raise ProfileError("InvalidArgs", f"{name}: {e}") from None
        self.built[name] = obj
        return obj


def _resolve_point(
    point: str,
    pset: PluginSet,
    mp: PluginSet,
    instances: _Instances,
    weights: dict[str, int | None],
) -> list[Plugin]:
    """The plugins of one extension point, in order: overrides of multiPoint entries,
    multiPoint's, then the point's other plugins. Records explicit ``score`` weights."""
    proto = EXTENSION_POINTS[point]
    explicit: list[str] = []
    for j, p in enumerate(pset.enabled):
        obj = instances.get(p.name, f"plugins.{point}.enabled[{j}].name")
        if not implements(obj, proto):
            raise ProfileError(
                "InvalidPlugin",
                f"plugins.{point}.enabled[{j}]: plugin {p.name!r} does not implement {point}",
            )
        if p.name in explicit:
            raise ProfileError(
                "InvalidPlugin",
                f"plugins.{point}.enabled[{j}]: plugin {p.name!r} is enabled twice",
            )
        explicit.append(p.name)
        if point == "score":
            weights[p.name] = p.weight
    disabled = {p.name for p in pset.disabled}
    overrides: list[str] = []
    from_mp: list[str] = []
    if "*" not in disabled:
        for p in mp.enabled:
            if not implements(instances.built[p.name], proto) or p.name in disabled:
                continue
            if p.name in explicit:
                overrides.append(p.name)
                continue
            if p.name in from_mp:
                raise ProfileError(
                    "InvalidPlugin", f"plugins.multiPoint: plugin {p.name!r} is enabled twice"
                )
            from_mp.append(p.name)
    order = (
        [n for n in explicit if n in overrides]
        + from_mp
        + [n for n in explicit if n not in overrides]
    )
    return [instances.built[n] for n in order]


def _assemble_chain(
    resolved: dict[str, list[Plugin]],
    weights: dict[str, int | None],
    mp_weights: dict[str, int | None],
    instances: _Instances,
) -> PluginChain:
    """The chain from the resolved points; checks the one-queueSort, some-bind rules."""
    chain = PluginChain()
    qs = resolved["queueSort"]
    if not qs and "PrioritySort" in instances.registry:
        # kubesched's default QueueSort is Coscheduling's; a profile that disables it
        # gets kube-scheduler's default back rather than no QueueSort at all.
        qs = [instances.get("PrioritySort", "default plugins")]
    if len(qs) != 1:
        raise ProfileError(
            "InvalidPlugin",
            f"plugins.queueSort: exactly one queueSort plugin must be enabled, got "
            f"[{', '.join(p.name for p in qs)}]",
        )
    if not resolved["bind"]:
        raise ProfileError("InvalidPlugin", "plugins.bind: at least one bind plugin is needed")
    # Each point was resolved by ``implements`` against its Protocol: these filters keep
    # every plugin and give mypy the point's type (once per compile, never per cycle).
    if not implements(qs[0], QueueSortPlugin):  # the PrioritySort fallback was not checked
        raise ProfileError(
            "InvalidPlugin",
            f"plugins.queueSort: plugin {qs[0].name!r} does not implement queueSort",
        )
    chain.queue_sort = qs[0]
    chain.pre_enqueue = [p for p in resolved["preEnqueue"] if implements(p, PreEnqueuePlugin)]
    chain.pre_filter = [p for p in resolved["preFilter"] if implements(p, PreFilterPlugin)]
    chain.filter = [p for p in resolved["filter"] if implements(p, FilterPlugin)]
    chain.post_filter = [p for p in resolved["postFilter"] if implements(p, PostFilterPlugin)]
    chain.pre_score = [p for p in resolved["preScore"] if implements(p, PreScorePlugin)]
    chain.score = [
        (p, (weights.get(p.name) if p.name in weights else mp_weights.get(p.name)) or 1)
        for p in resolved["score"]
        if implements(p, ScorePlugin)
    ]
    chain.reserve = [p for p in resolved["reserve"] if implements(p, ReservePlugin)]
    chain.permit = [p for p in resolved["permit"] if implements(p, PermitPlugin)]
    chain.pre_bind = [p for p in resolved["preBind"] if implements(p, PreBindPlugin)]
    chain.bind = [p for p in resolved["bind"] if implements(p, BindPlugin)]
    chain.post_bind = [p for p in resolved["postBind"] if implements(p, PostBindPlugin)]
    return chain


def _registered_events(built: dict[str, Plugin]) -> dict[str, list[ClusterEventWithHint]]:
    """The cluster events each plugin says can make its pods schedulable."""
    events: dict[str, list[ClusterEventWithHint]] = {}
    for name, obj in built.items():
        if implements(obj, EnqueueExtensions):
            events[name] = list(obj.events_to_register())
        else:
            # Like kube-scheduler: a plugin that does not say which events can make its
            # pods schedulable is assumed to care about all of them.
            events[name] = [
                ClusterEventWithHint(ClusterEvent(EventResource.WILDCARD, ActionType.ALL))
            ]
    return events
