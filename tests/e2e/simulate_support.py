"""``kubesched simulate``'s prediction of a scenario as it was created on a cluster, in a
process of its own (the differential's simulate check, the random clusters)."""

from __future__ import annotations

import asyncio
import copy
import multiprocessing
import traceback
from multiprocessing.connection import Connection
from typing import Any

import pytest

from kubesched.cli.explain import explain_objects
from kubesched.simulator.controllers import created_objects, is_controller
from kubesched.simulator.engine import simulate
from kubesched.simulator.scenario import Document
from kubesched.simulator.scenario import prepare as default_documents
from tests.e2e.differential_support import PENDING
from tests.e2e.scenario_cluster import JSON, TERMINATING

#: The tie-breaking seed of both ``kubesched simulate`` and ``kubesched run`` (the
#: differential's simulate check, the random clusters).
SEED = 7


def as_terminated(obj: JSON) -> JSON:
    """A copy of a created object as it is after :func:`apply`: held pods terminating."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    if out["kind"] == "Pod" and TERMINATING in (meta.get("finalizers") or ()):
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return out


#: A simulation that takes longer is stopped and fails its test (it runs in a process of
#: its own: a simulator that never settles must not hang the module).
SIMULATE_TIMEOUT = 60.0

Outcomes = dict[str, tuple[str, str]]


def _documents(created: list[JSON]) -> list[Document]:
    """The created objects as scenario documents, without the pods a controller among
    them creates again when the documents are loaded (a DaemonSet's, a ReplicaSet's
    replicas; not pods written by hand for a controller)."""
    nodes = [o for o in created if o["kind"] == "Node"]
    again = {
        (made["metadata"]["namespace"], made["metadata"]["name"])
        for o in created
        if is_controller(o)
        for made in created_objects(copy.deepcopy(o), nodes)
        if made["kind"] == "Pod"
    }
    kept = [
        o
        for o in created
        if o["kind"] != "Pod"
        or (o["metadata"].get("namespace") or "default", o["metadata"]["name"]) not in again
    ]
    return [Document("cluster", i, as_terminated(o)) for i, o in enumerate(kept)]


def _simulate_created(created: list[JSON]) -> Outcomes:
    docs = _documents(created)
    result = simulate(default_documents(docs), seed=SEED)
    return {f"{p.namespace}/{p.name}": (p.node or p.status, p.message) for p in result.pods}


async def _best_now(created: list[JSON], key: str) -> list[str]:
    docs = _documents(created)
    ns, name = key.split("/")
    exp = await explain_objects(default_documents(docs), ns, name, schedule=False)
    feasible = exp.feasible
    top = max((n.total for n in feasible), default=None)
    return sorted(n.node for n in feasible if n.total == top)


def _simulate_to(created: list[JSON], conn: Connection, best: str) -> None:
    try:
        conn.send(asyncio.run(_best_now(created, best)) if best else _simulate_created(created))
    except BaseException:
        conn.send(traceback.format_exc())


def simulated(created: list[JSON]) -> Outcomes:
    """``kubesched simulate --seed SEED`` on the objects as they were created on the
    cluster (in that order; defaulted by the scenario loader as a file would be): each
    pod to schedule -> (node | Unschedulable | Waiting, message)."""
    got: Outcomes = _in_child(created, best="")
    return got


def best_nodes(created: list[JSON], key: str) -> list[str]:
    """``kubesched explain`` of the pod ``key`` against the cluster as created, before
    anything is scheduled: the nodes that share the best total score (none when it fits
    nowhere yet). One node means no tie: a scheduler that scores as kube-scheduler does
    must pick it."""
    got: list[str] = _in_child(created, best=key)
    return got


def _in_child(created: list[JSON], *, best: str) -> Any:
    """In a process of its own (a simulator that never settles must not hang the module):
    the simulation, or with ``best`` (a pod's key) :func:`best_nodes`."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_simulate_to, args=(created, send, best), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(SIMULATE_TIMEOUT):
            pytest.fail(f"kubesched simulate did not finish within {SIMULATE_TIMEOUT:.0f} s")
        got = receive.recv()
    finally:
        receive.close()
        proc.kill()
        proc.join()
    if isinstance(got, str):
        pytest.fail(f"kubesched simulate failed:\n{got}")
    return got


def expected_outcomes(predicted: str, nodes: set[str]) -> set[str]:
    """What a scheduler on the cluster may show for a pod ``kubesched simulate`` left at
    ``predicted``: any node when it placed the pod (ties break differently), its pending
    outcome otherwise (Unschedulable, SchedulerError or Waiting, as the pod's condition
    says)."""
    return {predicted} if predicted in PENDING else nodes
