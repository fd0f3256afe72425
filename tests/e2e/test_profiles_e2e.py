"""SchedulingProfiles with ``kubectl apply`` on the real kube-apiserver, served live by
``kubesched run``: a profile makes its schedulerName schedulable, a change moves the next
pod without a restart, an invalid update is reported while the last good chain serves,
the CRD refuses malformed objects at admission, and a deleted profile leaves its pods
pending and untouched.

The module has a control plane of its own (SchedulingProfiles and CRDs are cluster-wide:
nothing leaks into other tests); the CRDs from ``crds/`` are installed before the
operator starts (a CRD installed later is test_profile_crd_later_e2e's). Each test uses its own schedulerName
and its own nodes (a unique label).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import yaml

from kubesched.operator import kopf_start
from kubesched.operator import run as run_mod
from kubesched.operator.run import Runtime
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.support import JSON, call, eventually, install_crds, local_settings, running

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def cp(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with ControlPlane(controlplane_binaries) as plane:
        install_crds(plane)
        yield plane


@pytest.fixture
async def kubesched(cp: ControlPlane) -> AsyncIterator[Runtime]:
    async with running(local_settings(cp.kubeconfig)) as started:
        yield started.runtime


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def profile(name: str, spec: JSON) -> str:
    body = {"apiVersion": "kubesched.dev/v1alpha1", "kind": "SchedulingProfile"}
    return yaml.safe_dump({**body, "metadata": {"name": name}, "spec": spec})


async def apply(cp: ControlPlane, name: str, spec: JSON) -> None:
    done = await call(cp.kubectl, "apply", "-f", "-", input=profile(name, spec))
    assert done.returncode == 0, done.stderr


def status(cp: ControlPlane, name: str) -> JSON:
    got = cp.kubectl("get", "schedulingprofile", name, "-o", "json", check=True)
    found: JSON = json.loads(got.stdout).get("status") or {}
    return found


def ready(st: JSON) -> JSON:
    (cond,) = [c for c in st.get("conditions") or () if c["type"] == "Ready"]
    return dict(cond)


async def observed(cp: ControlPlane, name: str, generation: int) -> JSON:
    """The status once the operator reconciled ``generation``."""

    def probe() -> JSON | None:
        st = status(cp, name)
        return st if st.get("observedGeneration") == generation else None

    found: JSON = await eventually(probe, what=f"{name} generation {generation} reconciled")
    return found


async def nodes(cp: ControlPlane, n: int) -> tuple[dict[str, str], list[str]]:
    pool = {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:8]}
    prefix = f"sp-{pool['e2e.kubesched.dev/pool']}-"
    made: list[str] = await call(cp.create_nodes, n, labels=pool, prefix=prefix, zones=0)
    return pool, made


async def pod(cp: ControlPlane, name: str, scheduler: str, pool: dict[str, str]) -> JSON:
    created: JSON = await call(
        cp.create_pod, name, scheduler_name=scheduler, spec={"nodeSelector": pool}
    )
    return created


def seen(kubesched: Runtime, pod: str, node: str, *others: str) -> bool:
    """Whether kubesched's cache holds the nodes and ``pod`` (in default) on ``node``."""
    got = kubesched.cluster.get("Pod", "default", pod)
    cached = all(kubesched.cluster.get("Node", "", n) for n in (node, *others))
    return cached and got is not None and got["spec"].get("nodeName") == node


def read(cp: ControlPlane, name: str) -> JSON:
    got: JSON = cp.api.read("v1", "Pod", name, "default")
    return got


async def test_applying_a_profile_makes_its_scheduler_name_schedulable(
    cp: ControlPlane, kubesched: Runtime
) -> None:
    name, pool = unique("sp-apply"), (await nodes(cp, 2))[0]
    await pod(cp, f"{name}-pod", name, pool)
    await asyncio.sleep(1.5)
    assert read(cp, f"{name}-pod")["spec"].get("nodeName") is None  # nobody serves it yet

    await apply(cp, name, {"schedulerName": name})
    assert await call(cp.wait_bound, f"{name}-pod")
    st = await observed(cp, name, 1)
    assert ready(st)["status"] == "True"
    assert ready(st)["reason"] == "Compiled"
    assert st["activeGeneration"] == 1 and st["schedulerName"] == name
    assert "NodeResourcesFit:1" in st["activePlugins"]["score"]  # name:weight
    table = (await call(cp.kubectl, "get", "schedulingprofiles", name)).stdout.split("\n")
    assert table[0].split() == ["NAME", "SCHEDULER", "READY", "ACTIVE", "AGE"]
    assert table[1].split()[:4] == [name, name, "True", "1"]
    finalizers = json.loads(
        (await call(cp.kubectl, "get", "schedulingprofile", name, "-o", "json")).stdout
    )["metadata"].get("finalizers")
    assert finalizers == ["kubesched.dev/finalizer"]
    events = await eventually(
        lambda: [
            e
            for e in cp.api.list("events.k8s.io/v1", "Event", "default")
            if e["regarding"].get("name") == name and e["reason"] == "Compiled"
        ],
        what="a Compiled event on the profile",
    )
    assert events[0]["reportingController"] == "kubesched"
    assert events[0]["regarding"]["kind"] == "SchedulingProfile"


async def test_a_profile_there_at_start_serves_the_first_pod_before_kopf_is_up(
    cp: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scheduling starts once the cache is synced; Kopf (and the profile handlers) start
    # after it. A profile applied before the start must still serve the first pod.
    name, pool = unique("sp-start"), (await nodes(cp, 2))[0]
    await apply(cp, name, {"schedulerName": name})
    await pod(cp, f"{name}-pod", name, pool)
    gate = asyncio.Event()
    real = kopf_start.start_kopf

    async def held(rt: Runtime, **kwargs: Any) -> None:
        await gate.wait()  # Kopf is held until the pod is bound
        await real(rt, **kwargs)

    monkeypatch.setattr(run_mod, "start_kopf", held)
    stop, up, built = asyncio.Event(), asyncio.Event(), list[Runtime]()
    task = asyncio.create_task(
        run_mod.run(settings=local_settings(cp.kubeconfig), stop=stop, ready=up, runtime=built)
    )
    try:
        assert await call(cp.wait_bound, f"{name}-pod")
        assert built[0].registry is None and not up.is_set()  # no Kopf handler yet
        gate.set()
        await asyncio.wait_for(up.wait(), 60)
        # then Kopf's handlers take the profile over from the start-up listing
        assert ready(await observed(cp, name, 1))["reason"] == "Compiled"
    finally:
        gate.set()
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_a_changed_profile_moves_the_next_pod_without_a_restart(
    cp: ControlPlane, kubesched: Runtime
) -> None:
    name, (pool, (busy, empty)) = unique("sp-swap"), await nodes(cp, 2)
    # a quarter of `busy` taken (cpu and memory alike, so balance does not decide)
    await call(cp.create_pod, f"{name}-load", cpu="1", memory="8Gi", spec={"nodeName": busy})
    await apply(cp, name, {"schedulerName": name})  # LeastAllocated: the emptier node
    await observed(cp, name, 1)
    # The profile comes by Kopf's watch, the load and the nodes by kubesched's own: its
    # status says nothing of them (the load unseen, both nodes would score the same).
    await eventually(
        lambda: seen(kubesched, f"{name}-load", busy, empty),
        what=f"kubesched seeing {name}-load on {busy}, and {empty}",
        in_thread=False,
    )
    await pod(cp, f"{name}-before", name, pool)
    assert await call(cp.wait_bound, f"{name}-before") == empty

    most = {"scoringStrategy": {"type": "MostAllocated"}}
    await apply(
        cp,
        name,
        {"schedulerName": name, "pluginConfig": [{"name": "NodeResourcesFit", "args": most}]},
    )
    assert ready(await observed(cp, name, 2))["reason"] == "Compiled"
    await pod(cp, f"{name}-after", name, pool)
    assert await call(cp.wait_bound, f"{name}-after") == busy


async def test_an_invalid_update_is_reported_while_the_last_good_chain_serves(
    cp: ControlPlane, kubesched: Runtime
) -> None:
    name, pool = unique("sp-invalid"), (await nodes(cp, 1))[0]
    await apply(cp, name, {"schedulerName": name})
    await observed(cp, name, 1)
    bad = {"schedulerName": name, "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}
    await apply(cp, name, bad)
    st = await observed(cp, name, 2)
    assert ready(st)["status"] == "False"
    assert ready(st)["reason"] == "InvalidPlugin"
    message = ready(st)["message"]
    assert message.startswith("plugins.score.enabled[0].name: unknown plugin 'Nope' (known: ")
    assert message.endswith(
        f"; the last good chain (generation 1) keeps serving schedulerName '{name}'"
    )
    assert st["activeGeneration"] == 1
    await pod(cp, f"{name}-pod", name, pool)
    assert await call(cp.wait_bound, f"{name}-pod")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"bogus": 1}, 'unknown field "spec.bogus"', id="unknown-field"),
        pytest.param(
            {"percentageOfNodesToScore": "lots"},
            'spec.percentageOfNodesToScore: Invalid value: "string": '
            "spec.percentageOfNodesToScore in body must be of type integer",
            id="wrong-type",
        ),
        pytest.param(
            {"plugins": {"queueSort": {"enabled": [{"name": "A"}, {"name": "B"}]}}},
            # (kube-apiserver 1.37 omits the value's type from a CEL rule's error, which
            # 1.34 printed as 'Invalid value: "object": ...')
            "spec.plugins.queueSort.enabled: Invalid value: "
            "at most one queueSort plugin may be enabled",
            id="cel-two-queue-sorts",
        ),
    ],
)
def test_the_crd_rejects_malformed_profiles_at_admission(
    cp: ControlPlane, spec: JSON, message: str
) -> None:
    name = unique("sp-malformed")
    done = cp.kubectl("apply", "-f", "-", input=profile(name, spec))
    assert done.returncode == 1
    assert message in done.stderr
    assert "NotFound" in cp.kubectl("get", "schedulingprofile", name).stderr


async def test_deleting_a_profile_leaves_its_pods_pending_and_untouched(
    cp: ControlPlane, kubesched: Runtime
) -> None:
    name, pool = unique("sp-delete"), (await nodes(cp, 1))[0]
    await apply(cp, name, {"schedulerName": name})
    await pod(cp, f"{name}-first", name, pool)
    assert await call(cp.wait_bound, f"{name}-first")
    done = await call(cp.kubectl, "delete", "schedulingprofile", name, "--timeout=20s")
    assert done.returncode == 0, done.stderr  # our finalizer came off

    created = await pod(cp, f"{name}-after", name, pool)
    await asyncio.sleep(2)
    after = read(cp, f"{name}-after")
    assert after["spec"].get("nodeName") is None
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert after.get("status", {}).get("conditions") is None  # no PodScheduled written
