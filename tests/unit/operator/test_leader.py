"""Leader election against a fake Lease API, in virtual time (looptime).

The fake keeps one Lease per name with a resourceVersion and answers 409 to a stale
write, as the API server does; ``fail`` makes every call raise (an unreachable server).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from kubesched.framework.cluster_port import Conflict
from kubesched.operator.leader import LeaderElector

pytestmark = pytest.mark.looptime


class FakeLeases:
    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.fail = False
        self.writes: list[str] = []  # holderIdentity of each successful write

    def _check(self) -> None:
        if self.fail:
            raise ConnectionError("apiserver unreachable")

    def _store(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(body)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.leases[(ns, name)] = obj
        self.writes.append(obj["spec"]["holderIdentity"])
        return copy.deepcopy(obj)

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        self._check()
        obj = self.leases.get((namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check()
        name = body["metadata"]["name"]
        if (namespace, name) in self.leases:
            raise Conflict("already exists")
        return self._store(namespace, name, body)

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        self._check()
        cur = self.leases.get((namespace, name))
        if cur is None or cur["metadata"]["resourceVersion"] != body["metadata"].get(
            "resourceVersion"
        ):
            raise Conflict("the object has been modified")
        return self._store(namespace, name, body)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.leases[("kube-system", "kubesched")]["spec"]
        return spec


def elector(api: FakeLeases, identity: str) -> LeaderElector:
    return LeaderElector(api, namespace="kube-system", name="kubesched", identity=identity)


class Campaign:
    """One elector running in a task, recording when it started and stopped leading."""

    def __init__(self, api: FakeLeases, identity: str) -> None:
        self.le = elector(api, identity)
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.leading_cancelled = False
        self.task = asyncio.create_task(self.le.run(self._lead, self._stop))

    async def _lead(self) -> None:
        self.started.append(asyncio.get_running_loop().time())
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.leading_cancelled = True
            raise

    def _stop(self) -> None:
        self.stopped.append(asyncio.get_running_loop().time())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def test_acquires_a_missing_lease_at_once() -> None:
    api = FakeLeases()
    c = Campaign(api, "a")
    await asyncio.sleep(0.1)
    assert c.le.is_leader and c.started == [0.0]
    spec = api.spec()
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"].endswith("Z") and len(spec["renewTime"].split(".")[1]) == 7
    await c.stop()


async def test_leader_renews_every_retry_period() -> None:
    api = FakeLeases()
    c = Campaign(api, "a")
    await asyncio.sleep(9.5)
    # create at 0, renewals at 2, 4, 6, 8
    assert api.writes == ["a"] * 5
    assert c.le.is_leader and not c.stopped
    await c.stop()


async def test_follower_waits_while_the_lease_is_renewed() -> None:
    api = FakeLeases()
    a = Campaign(api, "a")
    await asyncio.sleep(0.1)
    b = Campaign(api, "b")
    await asyncio.sleep(60)
    assert a.le.is_leader and not b.le.is_leader
    assert b.le.leader_identity == "a" and not b.started
    await b.stop()
    assert not b.stopped  # never led: nothing to stop
    await a.stop()


async def test_takeover_after_expiry_increments_transitions() -> None:
    api = FakeLeases()
    # A lease left behind by a crashed leader; the follower first sees it at t=0.
    api._store(
        "kube-system",
        "kubesched",
        {
            "metadata": {"name": "kubesched", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "dead",
                "leaseDurationSeconds": 15,
                "acquireTime": "2024-01-01T00:00:00.000000Z",
                "renewTime": "2024-01-01T00:00:00.000000Z",
                "leaseTransitions": 3,
            },
        },
    )
    b = Campaign(api, "b")
    await asyncio.sleep(14)
    assert not b.le.is_leader
    # Acquisition retries come every 2..4.4 s: it leads by 15 + 4.4 s.
    await asyncio.sleep(6)
    assert b.le.is_leader
    assert 15 <= b.started[0] <= 19.4
    spec = api.spec()
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 4)
    assert spec["acquireTime"] != "2024-01-01T00:00:00.000000Z"
    await b.stop()


async def test_lost_renewal_stops_leading_within_the_renew_deadline() -> None:
    api = FakeLeases()
    c = Campaign(api, "a")
    await asyncio.sleep(3)  # renewed at 2
    api.fail = True  # renewals from t=4 fail
    await asyncio.wait_for(c.task, timeout=30)
    assert not c.le.is_leader and c.leading_cancelled
    # The renewal that started at 4 gives up at 4 + 10: before anyone could take over
    # (the last successful renewal at 2 expires at 17).
    assert c.stopped == [pytest.approx(14.0)]
    assert c.stopped[0] < 2 + 15


async def test_conflict_means_someone_else_won_the_race() -> None:
    api = FakeLeases()
    a, b = Campaign(api, "a"), Campaign(api, "b")
    await asyncio.sleep(1)
    leaders = [c for c in (a, b) if c.le.is_leader]
    assert len(leaders) == 1
    # Both read "no lease"; one create won, the other got 409 and follows.
    assert api.writes == [leaders[0].le.identity]
    await a.stop()
    await b.stop()


async def test_stale_resource_version_is_a_conflict_not_a_takeover() -> None:
    api = FakeLeases()
    a = Campaign(api, "a")
    await asyncio.sleep(0.5)
    real_get = api.get_lease

    async def get_then_race(namespace: str, name: str) -> dict[str, Any] | None:
        lease = await real_get(namespace, name)
        # Someone writes between our read and our write.
        api._store(namespace, name, copy.deepcopy(api.leases[(namespace, name)]))
        return lease

    api.get_lease = get_then_race  # type: ignore[method-assign]
    await asyncio.sleep(2)  # the renewal at t=2 hits 409
    assert a.le.is_leader  # a 409 on renewal is retried until the deadline
    api.get_lease = real_get  # type: ignore[method-assign]
    await asyncio.sleep(3)
    assert a.le.is_leader and not a.stopped
    await a.stop()


async def test_graceful_stop_releases_and_the_follower_takes_over_fast() -> None:
    api = FakeLeases()
    a = Campaign(api, "a")
    await asyncio.sleep(0.1)
    b = Campaign(api, "b")
    await asyncio.sleep(10)
    await a.stop()
    assert a.stopped == [pytest.approx(10.1)] and a.leading_cancelled
    spec = api.spec()
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    await asyncio.sleep(5)
    assert b.le.is_leader
    assert b.started[0] - 10.1 <= 4.4  # one jittered retry period
    assert api.spec()["leaseTransitions"] == 1
    await b.stop()


async def test_failing_leading_task_releases_and_raises() -> None:
    api = FakeLeases()

    async def lead() -> None:
        await asyncio.sleep(3)
        raise RuntimeError("boom")

    le = elector(api, "a")
    stopped: list[bool] = []
    with pytest.raises(RuntimeError, match="boom"):
        await le.run(lead, lambda: stopped.append(True))
    assert stopped == [True]
    assert api.spec()["holderIdentity"] == ""


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [(10.0, 10.0, 2.0), (15.0, 2.0, 2.0), (15.0, 10.0, 0.5)],
    ids=["lease-not-above-renew", "renew-not-above-retry", "retry-under-1s"],
)
def test_invalid_timings_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElector(
            FakeLeases(),
            namespace="ns",
            name="n",
            identity="a",
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
        )


async def test_without_release_on_cancel_the_lease_is_left_to_expire() -> None:
    api = FakeLeases()
    le = LeaderElector(
        api, namespace="kube-system", name="kubesched", identity="a", release_on_cancel=False
    )

    async def lead() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(le.run(lead, lambda: None))
    await asyncio.sleep(3)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert api.spec()["holderIdentity"] == "a"
