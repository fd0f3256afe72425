"""Bad input, PodGroups (issue 9, item 4): a PodGroup with a spoiled spec (minMember 0,
negative or huge, bad timeouts, malformed minResources, wrong types, unknown keys) and its
members, beside valid pods, on a running scheduler (in-memory cluster, virtual time).

Properties: nothing raises and the loop keeps running; an invalid group holds its members
back and each member gets a FailedScheduling event naming the spoiled field; a valid
group is bound all or nothing; the valid pods are bound once; cache == cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
from collections import Counter
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.api.podgroup import parse_spec
from tests.builders import make_node, make_pod
from tests.integration.bad_input import ODD, Path, in_fresh_loop, put
from tests.integration.harness import Harness

pytestmark = pytest.mark.looptime

EXAMPLES = int(os.environ.get("KUBESCHED_BAD_INPUT_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
LABEL = "kubesched.dev/pod-group"
MEMBERS = 3

PATHS: tuple[Path, ...] = (
    ("spec",),
    ("spec", "minMember"),
    ("spec", "scheduleTimeoutSeconds"),
    ("spec", "minResources"),
    ("spec", "minResources", "cpu"),
    ("spec", "unknownKey"),
    ("status",),
)
SPECIAL: dict[Path, st.SearchStrategy[Any]] = {
    ("spec", "minMember"): st.sampled_from((0, -1, 1, 2, MEMBERS, 10**9, 10**30, "3", 1.5, True)),
    ("spec", "scheduleTimeoutSeconds"): st.sampled_from((0, -5, 1, 10**30, "10", 1e300, None)),
    ("spec", "minResources"): st.sampled_from(
        ({"cpu": "1.2.3"}, {"cpu": -1}, {"cpu": True}, {"memory": "99999999999Ei"}, {"": "1"})
    ),
}


def mutation() -> st.SearchStrategy[tuple[Path, Any]]:
    plain = st.tuples(st.sampled_from(PATHS), st.sampled_from(ODD))
    return st.one_of(plain, *(st.tuples(st.just(p), s) for p, s in SPECIAL.items()))


def group(mutations: list[tuple[Path, Any]]) -> dict[str, Any]:
    g: dict[str, Any] = {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default", "uid": "uid-g"},
        "spec": {"minMember": 2},
    }
    for path, value in mutations:
        put(g, path, copy.deepcopy(value))
    return g


def spec_error(g: dict[str, Any]) -> str | None:
    try:
        parse_spec(g)
    except pydantic.ValidationError:
        return "invalid"
    return None


async def check_group(mutations: list[tuple[Path, Any]]) -> None:
    h = Harness()
    h.apply(*(make_node(f"n{i}").alloc(cpu="8", memory="16Gi").obj() for i in range(2)))
    g = group(mutations)
    members = [make_pod(f"m{i}").req(cpu="100m").label(LABEL, "g").obj() for i in range(MEMBERS)]
    valid = [make_pod(f"ok-{i}").req(cpu="100m").obj() for i in range(3)]
    task = asyncio.create_task(h.sched.run())
    try:
        h.apply(g, *members[:1], *valid[:1], *members[1:], *valid[1:])
        await h.wait_for(lambda: all(h.node_of(f"default/ok-{i}") for i in range(3)), within=60)
        await asyncio.sleep(30)
        assert not task.done()
        assert h.bad == []  # a PodGroup is not the event handlers' to judge

        member_keys = [f"default/m{i}" for i in range(MEMBERS)]
        bound = [k for k in member_keys if h.node_of(k)]
        if spec_error(g) is not None:
            assert bound == []
            words = {p for path, _ in mutations for p in path if isinstance(p, str)}
            for k in member_keys:
                msgs = [e.message for e in h.cluster.events_for(k)]
                assert any("PodGroup default/g is invalid: spec" in m for m in msgs), msgs
                assert any(any(w in m for w in words) for m in msgs), (msgs, mutations)
        else:
            need = parse_spec(g).min_member
            assert len(bound) == (MEMBERS if need <= MEMBERS else 0), (bound, need)

        binds = Counter(key for key, _ in h.cluster.bindings)
        assert all(n == 1 for n in binds.values()), binds
        want: dict[str, list[str]] = {}
        for key, obj in h.cluster.objects.get("Pod", {}).items():
            if node := (obj.get("spec") or {}).get("nodeName"):
                want.setdefault(node, []).append(key)
        got = {n: keys for n, keys in h.sched.cache.dump().items() if keys}
        assert got == {n: sorted(keys) for n, keys in want.items()}
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await h.sched.abort()


@SETTINGS
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
def test_a_spoiled_pod_group_holds_its_members_with_a_reason(
    mutations: list[tuple[Path, Any]],
) -> None:
    in_fresh_loop(check_group(mutations))


NAMED: dict[str, list[tuple[Path, Any]]] = {
    "minMember 0": [(("spec", "minMember"), 0)],
    "negative minMember": [(("spec", "minMember"), -1)],
    "huge minMember": [(("spec", "minMember"), 10**30)],
    "negative timeout": [(("spec", "scheduleTimeoutSeconds"), -5)],
    "malformed minResources": [(("spec", "minResources"), {"cpu": "1.2.3"})],
    "spec is a list": [(("spec",), [1])],
    "unknown key": [(("spec", "unknownKey"), 1)],
}


@pytest.mark.parametrize("name", list(NAMED))
async def test_named_bad_pod_groups(name: str) -> None:
    await check_group(NAMED[name])
