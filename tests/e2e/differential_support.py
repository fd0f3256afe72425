"""The differential tests' runs (test_differential.py, test_gang_differential.py, the
random clusters, gangs and bursts): the corpus and its expectations, one scheduler run
over a scenario on a real kube-apiserver (``kubesched run`` in a thread of its own, or
kube-scheduler), and each pod's outcome, nomination and the victims read back (see
test_differential.py's docstring). Putting a scenario on the cluster, and the controllers
nobody runs, are :mod:`tests.e2e.scenario_cluster`'s."""

from __future__ import annotations

import asyncio
import gc
import pathlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from kubesched.operator.run import run
from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, ControlPlane, RestClient
from tests.e2e.scenario_cluster import JSON, apply, key_of, prepare, wipe

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(CORPUS.rglob("*.yaml"))

#: Families neither scheduler runs on the real control plane (see the module docstring).
KUBESCHED_ONLY = {
    "gang": "PodGroups: kube-scheduler has no Coscheduling; kubesched alone is checked "
    "against the expectations"
}

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "default-scheduler"

#: How long a scenario may take to reach its expected outcome (preemption needs a
#: backoff round: about 1-2 s).
SETTLE_TIMEOUT = 20.0
#: After the expectations are met, how long pods expected to stay pending are watched.
QUIET = 1.0


def expectations(path: pathlib.Path) -> dict[str, set[str]]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path} must start with an '# expect:' line"
    out: dict[str, set[str]] = {}
    for item in first.removeprefix("# expect:").split():
        key, _, value = item.partition("=")
        out[key] = set(value.split("|"))
    return out


def expected_victims(path: pathlib.Path) -> set[str] | None:
    """The ``# victims: ns/a ns/b`` (or ``# victims: none``) line among the file's leading
    comments: exactly the pods kube-scheduler evicts; None where the file has no such line."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# victims:"):
            names = line.removeprefix("# victims:").split()
            return set() if names == ["none"] else set(names)
    return None


PENDING = ("Unschedulable", "SchedulerError", "Waiting")
"""The outcomes of a pod left unbound (:func:`outcome`)."""


def outcome(pod: JSON) -> tuple[str, str]:
    """(node | Unschedulable | SchedulerError | Waiting, the PodScheduled message):
    ``PodScheduled=False`` with reason Unschedulable or SchedulerError (tried, failed
    with an error), Waiting for any other (or none)."""
    node = pod["spec"].get("nodeName")
    for c in pod.get("status", {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            if node:
                break
            if c.get("reason") in ("Unschedulable", "SchedulerError"):
                return str(c["reason"]), str(c.get("message") or "")
            return "Waiting", str(c.get("message") or "")
    return (node, "") if node else ("Waiting", "")


def observe(api: RestClient, keys: list[str]) -> dict[str, tuple[str, str]]:
    got: dict[str, tuple[str, str]] = {}
    for key in keys:
        ns, name = key.split("/")
        try:
            got[key] = outcome(api.read("v1", "Pod", name, ns))
        except ApiError as err:
            if err.status != 404:
                raise
            got[key] = ("Deleted", "")
    return got


def settle(
    api: RestClient, keys: list[str], expected: Mapping[str, set[str]]
) -> dict[str, tuple[str, str]]:
    """Wait until every pod matches its expectation (or SETTLE_TIMEOUT); the outcome."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        got = observe(api, keys)
        met = all(got[k][0] in expected.get(k, {got[k][0]}) for k in keys)
        if met or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if met and any(v and v <= set(PENDING) for v in expected.values()):
        time.sleep(QUIET)  # a pod expected to stay pending must not be bound meanwhile
        got = observe(api, keys)
    return got


@dataclass
class Run:
    scheduler: str
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: pods that were bound when the scheduler started and are gone (or going) at the end:
    #: preemption's victims (nothing else deletes pods here)
    victims: set[str] = field(default_factory=set)
    seconds: float = 0.0
    #: pods left unbound -> their status.nominatedNodeName ("" for none)
    nominated: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """Every pod's outcome (and nomination), then the victims: for a failure report."""
        text = "; ".join(
            f"{k}={where}" + (f" nominated {self.nominated[k]!r}" if self.nominated.get(k) else "")
            for k, (where, _) in sorted(self.outcomes.items())
        )
        return text + (f"; victims {sorted(self.victims)}" if self.victims else "")


def bound_pods(api: RestClient) -> set[str]:
    """Bound pods not already terminating (a scenario's terminating pod is no victim)."""
    return {
        key_of(p)
        for p in api.list("v1", "Pod")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def nominations(api: RestClient, keys: list[str]) -> dict[str, str]:
    """Each pod's status.nominatedNodeName ("" for none or a pod gone)."""
    got: dict[str, str] = {}
    for key in keys:
        ns, name = key.split("/")
        try:
            pod = api.read("v1", "Pod", name, ns)
        except ApiError as err:
            if err.status != 404:
                raise
            pod = {}
        got[key] = str((pod.get("status") or {}).get("nominatedNodeName") or "")
    return got


def gone(api: RestClient, keys: set[str]) -> set[str]:
    """The pods of ``keys`` that no longer exist or are being deleted."""
    present = {
        key_of(p): p for p in api.list("v1", "Pod") if not p["metadata"].get("deletionTimestamp")
    }
    return {k for k in keys if k not in present}


class KubeschedThread:
    """``kubesched run`` (its ``run`` coroutine) in a thread with its own event loop."""

    def __init__(self, kubeconfig: str, seed: int | None = None) -> None:
        self.settings = Settings(
            kubeconfig=kubeconfig,
            seed=seed,
            scheduler_names=[KUBESCHED],
            leader_elect=False,
            bind_address="127.0.0.1",
            port=0,
            client_qps=0,
            resync_seconds=0,
        )
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kubesched", daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            task = asyncio.create_task(run(settings=self.settings, stop=self._stop, ready=ready))
            await ready.wait()
            self._ready.set()
            await task

        try:
            asyncio.run(main())
        except BaseException as err:
            self._error = err
        finally:
            self._ready.set()

    def __enter__(self) -> KubeschedThread:
        self._thread.start()
        assert self._ready.wait(60), "kubesched run not ready within 60 s"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        # What the run left unclosed is collected here, so that its ResourceWarnings (warnings
        # are errors) fail this test rather than a later one.
        self._thread.join(30)
        gc.collect()
        if self._error is not None:
            raise self._error


def run_scenario(
    cp: ControlPlane,
    objects: list[JSON],
    expected: Mapping[str, set[str]],
    scheduler: str,
    seed: int | None = None,
) -> Run:
    api = cp.api
    wipe(api)
    prepared, pending = prepare(objects, scheduler)
    apply(api, prepared)
    result = Run(scheduler)
    running = bound_pods(api)
    start = time.monotonic()
    if scheduler == KUBE_SCHEDULER:
        sched = cp.start_kube_scheduler()
        try:
            result.outcomes = settle(api, pending, expected)
        finally:
            sched.stop()
            cp.schedulers.remove(sched)
    else:
        with KubeschedThread(str(cp.kubeconfig), seed=seed):
            result.outcomes = settle(api, pending, expected)
    result.nominated = nominations(api, [k for k, v in result.outcomes.items() if v[0] in PENDING])
    result.victims = gone(api, running)
    result.seconds = time.monotonic() - start
    return result


#: The API of Kubernetes' own gangs (Workload, PodGroup), served only with the
#: GenericWorkload gate: scenarios using it run in test_gang_differential, on a control
#: plane with the gates on, against kube-scheduler's own gang scheduling.
UPSTREAM_GANGS = "scheduling.k8s.io/v1beta1"


def uses_upstream_gangs(path: pathlib.Path) -> bool:
    """Whether a scenario file holds Workload or PodGroup objects of the upstream API."""
    return any(
        doc and doc.get("apiVersion") == UPSTREAM_GANGS and doc.get("kind") != "PriorityClass"
        for doc in yaml.safe_load_all(path.read_text())
    )
