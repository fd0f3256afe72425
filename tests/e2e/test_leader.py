"""Leader election against the real kube-apiserver: one leader, and a bounded handover.

Short timings (lease 4 s, renew deadline 3 s, retry 1 s) keep the test quick; the rules
are the same as with kube-scheduler's 15/10/2.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from kubesched.operator.leader import KubeLeaseAPI, LeaderElector
from tests.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(90)

LEASE, RENEW, RETRY = 4.0, 3.0, 1.0
# The longest a follower sleeps between attempts (client-go's jitter), plus slack for
# the API round trips on a loaded CI machine.
ATTEMPT = RETRY * 2.2 + 1.5


@pytest.fixture
async def api(controlplane: ControlPlane) -> AsyncIterator[k8s_client.ApiClient]:
    cfg = k8s_client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(controlplane.kubeconfig), client_configuration=cfg
    )
    async with k8s_client.ApiClient(configuration=cfg) as client:
        yield client


class Replica:
    def __init__(self, api: Any, namespace: str, lease: str, identity: str, **kw: Any) -> None:
        self.le = LeaderElector(
            api,
            namespace=namespace,
            name=lease,
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            **kw,
        )
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.task = asyncio.create_task(self.le.run(self._lead, self._stop))

    async def _lead(self) -> None:
        self.started.append(asyncio.get_running_loop().time())
        await asyncio.Event().wait()

    def _stop(self) -> None:
        self.stopped.append(asyncio.get_running_loop().time())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def until(pred: Any, within: float, what: str) -> float:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not pred():
        if loop.time() > deadline:
            raise AssertionError(f"not within {within:.1f} s: {what}")
        await asyncio.sleep(0.05)
    return loop.time()


async def lease_spec(api: Any, namespace: str, name: str) -> dict[str, Any]:
    lease = await KubeLeaseAPI(api).get_lease(namespace, name)
    assert lease is not None
    spec: dict[str, Any] = lease["spec"]
    return spec


async def test_two_replicas_elect_one_and_hand_over_on_stop(
    api: k8s_client.ApiClient, namespace: str
) -> None:
    lease = f"kubesched-{uuid.uuid4().hex[:6]}"
    a = Replica(api, namespace, lease, "replica-a")
    b = Replica(api, namespace, lease, "replica-b")
    try:
        await until(lambda: a.le.is_leader or b.le.is_leader, ATTEMPT, "a leader")
        # Several renewals later there is still exactly one leader, the same one.
        await asyncio.sleep(LEASE + RETRY)
        leaders = [r for r in (a, b) if r.le.is_leader]
        assert len(leaders) == 1
        leader, follower = (a, b) if leaders[0] is a else (b, a)
        spec = await lease_spec(api, namespace, lease)
        assert spec["holderIdentity"] == leader.le.identity
        assert spec["leaseDurationSeconds"] == int(LEASE)
        assert follower.le.leader_identity == leader.le.identity
        assert not follower.started and len(leader.started) == 1

        t_stop = asyncio.get_running_loop().time()
        await leader.stop()
        assert leader.stopped and not leader.le.is_leader
        t_new = await until(lambda: follower.le.is_leader, ATTEMPT, "the follower leads")
        # Released on stop: a retry period, not a lease duration.
        assert t_new - t_stop < LEASE
        spec = await lease_spec(api, namespace, lease)
        assert spec["holderIdentity"] == follower.le.identity
        assert spec["leaseTransitions"] == 1
    finally:
        await a.stop()
        await b.stop()


async def test_crashed_leader_is_replaced_after_the_lease_expires(
    api: k8s_client.ApiClient, namespace: str
) -> None:
    lease = f"kubesched-{uuid.uuid4().hex[:6]}"
    a = Replica(api, namespace, lease, "replica-a", release_on_cancel=False)
    try:
        await until(lambda: a.le.is_leader, ATTEMPT, "a leads")
        b = Replica(api, namespace, lease, "replica-b")
        await asyncio.sleep(RETRY * 2)
        assert not b.le.is_leader
        t_crash = asyncio.get_running_loop().time()
        await a.stop()  # no release: the lease is left as a crash would leave it
        spec = await lease_spec(api, namespace, lease)
        assert spec["holderIdentity"] == "replica-a"
        t_new = await until(lambda: b.le.is_leader, LEASE + ATTEMPT + 1, "b takes over")
        # Not before the lease (last renewed at most one retry period before the crash)
        # can have expired, and not much after.
        assert t_new - t_crash >= LEASE - RETRY - 0.5
        spec = await lease_spec(api, namespace, lease)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-b", 1)
        await b.stop()
    finally:
        await a.stop()
