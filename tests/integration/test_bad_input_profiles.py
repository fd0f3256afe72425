"""Bad input, SchedulingProfiles (issue 9, item 4): a good profile serves, then hypothesis
updates it with a spoiled spec (unknown and duplicate plugins, bad args, negative weights,
wrong types, unknown keys) through the real handler bookkeeping (ProfileController on a
recorded API, the Scheduler of an in-memory cluster).

Properties: the handler never raises; a refused update is ``Ready=False`` with one of
the documented reasons and a message that names a spoiled field or value and says the
last good chain keeps serving; that chain (the same object) still serves and binds pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.profile_status import COMPILED, REASONS
from tests.builders import make_node, make_pod
from tests.integration.bad_input import ODD, WEIGHTS, Path, in_fresh_loop, put
from tests.integration.harness import Harness
from tests.integration.test_profile_handlers import RecordedApi, controller, profile

pytestmark = pytest.mark.looptime

EXAMPLES = int(os.environ.get("KUBESCHED_BAD_INPUT_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

NAME = "batch"


def good_spec() -> dict[str, Any]:
    return {
        "schedulerName": NAME,
        "plugins": {
            "score": {
                "enabled": [{"name": "NodeResourcesFit", "weight": 5}],
                "disabled": [{"name": "NodeResourcesBalancedAllocation"}],
            }
        },
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "MostAllocated",
                        "resources": [
                            {"name": "cpu", "weight": 1},
                            {"name": "memory", "weight": 1},
                        ],
                    }
                },
            }
        ],
    }


SCORE0: Path = ("plugins", "score", "enabled", 0)
ARGS0: Path = ("pluginConfig", 0, "args")
PATHS: tuple[Path, ...] = (
    (),
    ("schedulerName",),
    ("plugins",),
    ("plugins", "score"),
    ("plugins", "score", "enabled"),
    SCORE0,
    (*SCORE0, "name"),
    (*SCORE0, "weight"),
    ("plugins", "score", "disabled"),
    ("plugins", "filter", "enabled"),
    ("plugins", "queueSort", "enabled"),
    ("plugins", "multiPoint", "enabled"),
    ("plugins", "permit", "enabled", 0, "name"),
    ("pluginConfig",),
    ("pluginConfig", 0),
    ("pluginConfig", 0, "name"),
    ARGS0,
    (*ARGS0, "scoringStrategy"),
    (*ARGS0, "scoringStrategy", "type"),
    (*ARGS0, "scoringStrategy", "resources"),
    (*ARGS0, "scoringStrategy", "resources", 0, "weight"),
    (*ARGS0, "scoringStrategy", "resources", 0, "name"),
    ("pluginConfig", 1),
    ("percentageOfNodesToScore",),
    ("backoff",),
    ("backoff", "initialSeconds"),
    ("backoff", "maxSeconds"),
    ("backoff", "maxUnschedulableSeconds"),
)
PLUGIN_NAMES = (
    "NoSuchPlugin",
    "",
    "*",
    "NodeResourcesFit",
    "PrioritySort",
    "Coscheduling",
    "DefaultBinder",
    "ImageLocality",
    "x" * 300,
)
OTHER_ARGS = st.sampled_from(
    (
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": -1}},
        {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 10**12}},
        {
            "name": "PodTopologySpread",
            "args": {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Bogus"}
                ],
            },
        },
        {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": -5}},
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}},
        {
            "name": "NodeAffinity",
            "args": {
                "addedAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "z", "operator": "Gt"}]}
                        ]
                    }
                }
            },
        },
        {"name": "NoSuchPlugin", "args": {}},
        {"name": "NodeResourcesFit", "args": {}},  # a second config for one plugin
        {"name": "TaintToleration", "args": {"unknownArg": 1}},
    )
)
SPECIAL: dict[Path, st.SearchStrategy[Any]] = {
    (*SCORE0, "name"): st.sampled_from(PLUGIN_NAMES),
    (*SCORE0, "weight"): st.sampled_from(WEIGHTS),
    ("plugins", "queueSort", "enabled"): st.just(
        [{"name": "PrioritySort"}, {"name": "Coscheduling"}]
    ),
    ("plugins", "score", "enabled"): st.just(
        [{"name": "ImageLocality", "weight": 1}, {"name": "ImageLocality", "weight": 2}]
    ),
    ("plugins", "permit", "enabled", 0, "name"): st.sampled_from(PLUGIN_NAMES),
    (*ARGS0, "scoringStrategy", "type"): st.sampled_from(("Bogus", "", "RequestedToCapacityRatio")),
    (*ARGS0, "scoringStrategy", "resources", 0, "weight"): st.sampled_from(WEIGHTS),
    ("pluginConfig", 1): OTHER_ARGS,
    ("percentageOfNodesToScore",): st.sampled_from(WEIGHTS),
    ("backoff", "initialSeconds"): st.sampled_from((-1, 0, 1e300, float("inf"), "1s")),
}


def mutation() -> st.SearchStrategy[tuple[Path, Any]]:
    plain = st.tuples(st.sampled_from(PATHS), st.sampled_from(ODD))
    unknown = st.tuples(
        st.sampled_from(PATHS).map(lambda p: (*p, "unknownKey")), st.sampled_from(ODD)
    )
    special = [st.tuples(st.just(p), s) for p, s in SPECIAL.items()]
    return st.one_of(plain, unknown, *special)


def spoil(spec: dict[str, Any], mutations: list[tuple[Path, Any]]) -> Any:
    out: Any = spec
    for path, value in mutations:
        if not path:
            out = copy.deepcopy(value)
            continue
        if not isinstance(out, dict):
            out = {}
        put(out, path, copy.deepcopy(value))
    return out


def words(mutations: list[tuple[Path, Any]]) -> set[str]:
    """Field names and string values of the mutations: a specific message has one."""
    out = {p for path, _ in mutations for p in path if isinstance(p, str)}
    for _, v in mutations:
        if isinstance(v, str) and v:
            out.add(v)
        if isinstance(v, dict):
            out.update(str(k) for k in v)
            out.update(str(x) for x in v.values() if isinstance(x, str) and x)
    return out | {"spec"}


def pod(name: str, scheduler: str = NAME) -> dict[str, Any]:
    return make_pod(name).scheduler(scheduler).req(cpu="100m").obj()


async def check_update(mutations: list[tuple[Path, Any]]) -> None:
    h = Harness()
    h.apply(*(make_node(f"n{i}").alloc(cpu="4", memory="8Gi").obj() for i in range(2)))
    good = profile("p", "2030-01-01T00:00:00Z", scheduler=NAME)
    good["spec"] = good_spec()
    api = RecordedApi(good)
    ctl = controller(h, api)
    task = asyncio.create_task(h.sched.run())
    try:
        assert await ctl.load() == 1
        assert api.objs["p"]["status"]["conditions"][0]["reason"] == COMPILED
        serving = h.sched.profiles[NAME]

        bad = copy.deepcopy(api.objs["p"])
        bad["metadata"]["generation"] = 2
        bad["spec"] = spoil(good_spec(), mutations)
        api.objs["p"]["spec"] = copy.deepcopy(bad["spec"])
        api.objs["p"]["metadata"]["generation"] = 2
        await ctl.applied(copy.deepcopy(bad))  # never raises: a bad spec is a status

        cond = api.objs["p"]["status"]["conditions"][0]
        assert cond["reason"] in REASONS and cond["observedGeneration"] == 2, cond
        if cond["status"] == "False":
            msg = cond["message"]
            assert any(w in msg for w in words(mutations)), (msg, mutations)
            assert "the last good chain (generation 1) keeps serving" in msg, msg
            assert "Error(" not in msg and "Traceback" not in msg, msg
            assert api.objs["p"]["status"]["activeGeneration"] == 1
            assert h.sched.profiles[NAME] is serving
            served = NAME
        else:
            served = api.objs["p"]["status"]["schedulerName"]
        h.apply(pod("after", served))
        await h.wait_for(lambda: bool(h.node_of("default/after")), within=60)
        assert not task.done()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await h.sched.abort()


@SETTINGS
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
def test_a_spoiled_update_is_a_status_and_the_last_good_chain_serves(
    mutations: list[tuple[Path, Any]],
) -> None:
    in_fresh_loop(check_update(mutations))


NAMED: dict[str, list[tuple[Path, Any]]] = {
    "unknown plugin": [((*SCORE0, "name"), "NoSuchPlugin")],
    "negative weight": [((*SCORE0, "weight"), -1)],
    "duplicate score plugin": [
        (
            ("plugins", "score", "enabled"),
            [{"name": "ImageLocality", "weight": 1}, {"name": "ImageLocality", "weight": 2}],
        )
    ],
    "two queue sorts": [
        (("plugins", "queueSort", "enabled"), [{"name": "PrioritySort"}, {"name": "Coscheduling"}])
    ],
    "bad args": [((*ARGS0, "scoringStrategy", "type"), "Bogus")],
    "spec is a list": [((), [1, 2])],
    "spec is null": [((), None)],
    "pluginConfig is a map": [(("pluginConfig",), {"x": {}})],
    "unknown key": [(("plugins", "unknownKey"), 1)],
}


@pytest.mark.parametrize("name", list(NAMED))
async def test_named_bad_profiles(name: str) -> None:
    await check_update(NAMED[name])
