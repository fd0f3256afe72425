"""Profiles compile like kube-scheduler's: defaults in kube's order and weights, the
v1 merge rules, and errors that name the field a user got wrong."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.api.profile import ProfileSpec
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo, QueuedPodInfo
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import PluginChain
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from kubesched.plugins.node_resources_fit import NodeResourcesFit
from kubesched.profiles import ProfileError, compile_profile, default_profile_spec

# kube-scheduler v1.37.2's default plugins per extension point, in order (the multiPoint
# defaults with its default feature gates, expanded by the interfaces each plugin
# implements); the test keeps the ones registered here.
KUBE_DEFAULT_CHAINS: dict[str, list[str]] = {
    "queueSort": ["PrioritySort"],
    "preEnqueue": ["SchedulingGates", "DynamicResources", "DefaultPreemption"],
    "preFilter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "filter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "postFilter": ["DynamicResources", "DefaultPreemption"],
    "preScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        "TaintToleration:3",
        "NodeAffinity:2",
        "NodeResourcesFit:1",
        "VolumeBinding:1",
        "PodTopologySpread:2",
        "InterPodAffinity:2",
        "DynamicResources:2",
        "NodeResourcesBalancedAllocation:1",
        "ImageLocality:1",
    ],
    "reserve": ["VolumeBinding", "DynamicResources"],
    "preBind": ["VolumeBinding", "DynamicResources"],
    "bind": ["DefaultBinder"],
}

REGISTERED = set(in_tree_registry())

# kubesched's default profile: kube's chains, with Coscheduling's QueueSort instead of
# PrioritySort and Coscheduling appended wherever it implements the point.
KUBESCHED_ADDITIONS = ("preEnqueue", "preFilter", "postFilter", "reserve", "permit")


def kubesched_default_chain(point: str) -> list[str]:
    if point == "queueSort":
        return ["Coscheduling"]
    kube = [n for n in KUBE_DEFAULT_CHAINS.get(point, []) if n.split(":")[0] in REGISTERED]
    return kube + (["Coscheduling"] if point in KUBESCHED_ADDITIONS else [])


def chain_of(spec: ProfileSpec | dict[str, Any], registry: Registry | None = None) -> PluginChain:
    if isinstance(spec, dict):
        spec = ProfileSpec.model_validate(spec)
    return compile_profile(spec, registry=registry).framework.chain


@pytest.mark.parametrize("point", [*KUBE_DEFAULT_CHAINS, "permit"])
def test_default_chain_matches_kube_scheduler_plus_coscheduling(point: str) -> None:
    assert chain_of(default_profile_spec()).names().get(point, []) == kubesched_default_chain(point)


def test_disabling_coscheduling_gives_kube_schedulers_default_profile() -> None:
    names = chain_of({"plugins": {"multiPoint": {"disabled": [{"name": "Coscheduling"}]}}}).names()
    for point, chain in KUBE_DEFAULT_CHAINS.items():
        assert names.get(point, []) == [n for n in chain if n.split(":")[0] in REGISTERED]
    assert "permit" not in names


def test_default_score_weights() -> None:
    weights = {p.name: w for p, w in chain_of(default_profile_spec()).score}
    assert (weights["TaintToleration"], weights["NodeResourcesFit"]) == (3, 1)
    assert weights["NodeResourcesBalancedAllocation"] == 1


# -- merge semantics -------------------------------------------------------------------------------
def test_reenabling_a_default_with_a_new_weight_keeps_its_position() -> None:
    chain = chain_of(
        {"plugins": {"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 5}]}}}
    )
    default = chain_of(default_profile_spec()).names()["score"]
    assert chain.names()["score"] == [
        "TaintToleration:5" if n == "TaintToleration:3" else n for n in default
    ]
    assert chain.names()["filter"] == chain_of(default_profile_spec()).names()["filter"]


def test_disabling_one_point_keeps_the_plugin_elsewhere() -> None:
    names = chain_of({"plugins": {"filter": {"disabled": [{"name": "TaintToleration"}]}}}).names()
    assert "TaintToleration" not in names["filter"]
    assert "TaintToleration:3" in names["score"]


def test_disabled_star_at_a_point_keeps_only_what_is_enabled_there() -> None:
    names = chain_of(
        {
            "plugins": {
                "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeName"}]},
                "score": {"disabled": [{"name": "*"}]},
            }
        }
    ).names()
    assert names["filter"] == ["NodeName"]
    assert "score" not in names
    assert names["bind"] == ["DefaultBinder"]


def test_multipoint_disabled_star_replaces_every_default() -> None:
    names = chain_of(
        {
            "plugins": {
                "multiPoint": {
                    "disabled": [{"name": "*"}],
                    "enabled": [
                        {"name": "PrioritySort"},
                        {"name": "NodeName"},
                        {"name": "DefaultBinder"},
                    ],
                }
            }
        }
    ).names()
    assert names == {
        "queueSort": ["PrioritySort"],
        "preFilter": ["NodeName"],
        "filter": ["NodeName"],
        "bind": ["DefaultBinder"],
    }


class Extra:
    """An out-of-tree Filter and Score plugin."""

    name = "Extra"

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return 0, None

    def normalize_score(self, state: CycleState, pod: Pod, scores: Any) -> Status | None:
        return None


class OtherSort:
    name = "OtherSort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return False

    def sort_key(self, qpi: QueuedPodInfo) -> int:
        return 0


def registry_with(*plugins: type[Extra] | type[OtherSort]) -> Registry:
    reg = in_tree_registry()
    for cls in plugins:

        def factory(args: Any, handle: Any, cls: type[Extra] | type[OtherSort] = cls) -> Any:
            return cls()

        reg.register(cls.name, factory, source="test")
    return reg


def test_specific_points_override_multipoint_then_multipoint_then_the_rest() -> None:
    # kube's expandMultiPointPlugins: plugins also enabled at the point come first (in the
    # point's order), then the multiPoint ones, then plugins only enabled at the point.
    chain = chain_of(
        {
            "plugins": {
                "filter": {"enabled": [{"name": "Extra"}, {"name": "NodeResourcesFit"}]},
                "score": {
                    "enabled": [
                        {"name": "NodeResourcesFit", "weight": 7},
                        {"name": "TaintToleration"},
                    ]
                },
            }
        },
        registry_with(Extra),
    )
    default = chain_of(default_profile_spec()).names()
    assert chain.names()["filter"] == [
        "NodeResourcesFit",
        *(n for n in default["filter"] if n != "NodeResourcesFit"),
        "Extra",
    ]
    # A weight given at score wins over multiPoint's; none given there means 1 (kube).
    score = chain.names()["score"]
    assert score[:2] == ["NodeResourcesFit:7", "TaintToleration:1"]
    assert sorted(score[2:]) == sorted(
        n for n in default["score"] if not n.startswith(("NodeResourcesFit", "TaintToleration"))
    )


def test_plugin_config_args_reach_the_plugin() -> None:
    chain = chain_of(
        {
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
            ]
        }
    )
    fit = next(p for p in chain.filter if p.name == "NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFit)
    assert fit.strategy.value == "MostAllocated"


# -- errors -----------------------------------------------------------------------------------------
ERROR_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "unknown-plugin-in-multipoint",
        {"plugins": {"multiPoint": {"enabled": [{"name": "Nope"}]}}},
        "InvalidPlugin",
        "plugins.multiPoint.enabled[0].name: unknown plugin 'Nope' (known: ",
    ),
    (
        "unknown-plugin-at-a-point",
        {"plugins": {"filter": {"enabled": [{"name": "NodeName"}, {"name": "Nope"}]}}},
        "InvalidPlugin",
        "plugins.filter.enabled[1].name: unknown plugin 'Nope'",
    ),
    (
        "plugin-at-a-point-it-does-not-implement",
        {"plugins": {"filter": {"enabled": [{"name": "PrioritySort"}]}}},
        "InvalidPlugin",
        "plugins.filter.enabled[0]: plugin 'PrioritySort' does not implement filter",
    ),
    (
        "enabled-twice-at-a-point",
        {"plugins": {"filter": {"enabled": [{"name": "NodeName"}, {"name": "NodeName"}]}}},
        "InvalidPlugin",
        "plugins.filter.enabled[1]: plugin 'NodeName' is enabled twice",
    ),
    (
        "invalid-args",
        {"pluginConfig": [{"name": "TaintToleration", "args": {"bogus": 1}}]},
        "InvalidArgs",
        "pluginConfig[0].args.bogus: Extra inputs are not permitted",
    ),
    (
        "invalid-nested-args",
        {
            "pluginConfig": [
                {"name": "NodeName"},
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Random"}}},
            ]
        },
        "InvalidArgs",
        "pluginConfig[1].args.scoringStrategy.type: ",
    ),
    (
        "duplicate-plugin-config",
        {"pluginConfig": [{"name": "NodeName"}, {"name": "NodeName"}]},
        "InvalidArgs",
        "pluginConfig[1].name: duplicate config for 'NodeName'",
    ),
    (
        "config-for-an-unknown-plugin",
        {"pluginConfig": [{"name": "Nope"}]},
        "InvalidPlugin",
        "pluginConfig[0].name: unknown plugin 'Nope'",
    ),
    (
        "two-queue-sort-plugins",
        {"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}]}}},
        "InvalidPlugin",
        "plugins.queueSort: exactly one queueSort plugin must be enabled, got [Coscheduling, OtherSort]",
    ),
    (
        "no-bind-plugin",
        {"plugins": {"bind": {"disabled": [{"name": "*"}]}}},
        "InvalidPlugin",
        "plugins.bind: at least one bind plugin is needed",
    ),
]


@pytest.mark.parametrize(
    ("spec", "reason", "message"),
    [c[1:] for c in ERROR_CASES],
    ids=[c[0] for c in ERROR_CASES],
)
def test_errors_give_a_reason_and_name_the_field(
    spec: dict[str, Any], reason: str, message: str
) -> None:
    with pytest.raises(ProfileError) as exc:
        chain_of(spec, registry_with(OtherSort))
    assert exc.value.reason == reason
    assert exc.value.message.startswith(message), exc.value.message


def test_a_default_plugin_missing_from_the_registry_is_not_blamed_on_the_user() -> None:
    reg = Registry()
    for name in ("Coscheduling", "DefaultBinder"):
        spec = in_tree_registry().get(name)
        assert spec is not None
        reg.register(name, spec.factory, spec.args)
    with pytest.raises(ProfileError, match=r"^default plugins: unknown plugin '\w+'"):
        chain_of(default_profile_spec(), reg)
