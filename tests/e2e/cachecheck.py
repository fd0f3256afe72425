"""Compare a running kubesched's cache (``GET /debug/cache``) with the API server.

The invariants issue 9 asks every reliability scenario to end in:

- every pod bound in the API (not terminal) is in the cache, on the same node;
- no pod is in the cache that the API does not have bound there (assumed pods whose
  bind is still in flight aside, unless ``settled``);
- no pod is both assumed and queued;
- every pod of ``scheduler_name`` still unbound in the API is pending with a reason:
  in the queue (or assumed, or mid-cycle), and with its last failure message or a
  ``PodScheduled=False`` condition once it has been tried;
- the cache's nodes are the API's nodes, with the same ``unschedulable``.

``cache_mismatches`` is the pure comparison (unit-tested); ``assert_cache_matches_api``
fetches both sides (synchronously: call it through ``asyncio.to_thread`` from a test
whose loop runs the scheduler) and retries until they agree or ``within`` runs out,
since the watch lags the API by design.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.controlplane import RestClient

__all__ = ["assert_cache_matches_api", "cache_mismatches", "fetch_cache"]

JSON = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


def fetch_cache(scheduler_url: str, timeout: float = 10.0) -> JSON:
    """``GET {scheduler_url}/debug/cache`` (e.g. ``http://127.0.0.1:10259``)."""
    with urllib.request.urlopen(f"{scheduler_url.rstrip('/')}/debug/cache", timeout=timeout) as r:
        doc: JSON = json.loads(r.read())
    return doc


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def _scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for c in pod.get("status", {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


@dataclass
class _Cache:
    """The scheduler's dump, by pod key (``namespace/name``)."""

    node_of: dict[str, str] = field(default_factory=dict)
    uid_of: dict[str, str] = field(default_factory=dict)
    assumed: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    pending: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    in_flight: set[str] = field(default_factory=set)
    """uids of pods in a scheduling cycle."""


def _read_dump(dump: Mapping[str, Any]) -> tuple[_Cache, list[str]]:
    """The dump indexed, and the pods it holds on two nodes at once."""
    cache, out = _Cache(), []
    for node in dump["nodes"]:
        for p in node["pods"]:
            if p["pod"] in cache.node_of:
                out.append(
                    f"{p['pod']} is in the cache on {cache.node_of[p['pod']]} and {node['name']}"
                )
            cache.node_of[p["pod"]] = node["name"]
            cache.uid_of[p["pod"]] = p["uid"]
    cache.assumed = {a["pod"]: a for a in dump["assumed"]}
    cache.pending = {p["pod"]: p for p in dump["pending"]}
    cache.in_flight = set(dump.get("inFlight", ()))
    return cache, out


def cache_mismatches(
    dump: Mapping[str, Any],
    api_pods: Iterable[Mapping[str, Any]],
    api_nodes: Iterable[Mapping[str, Any]] | None,
    scheduler_name: str,
    *,
    namespace: str | None = None,
    settled: bool = True,
) -> list[str]:
    """What differs between the scheduler's dump and the API's pods (and nodes, unless
    ``api_nodes`` is None); empty when they agree. ``namespace`` limits the pod checks
    to one namespace (a shared control plane); ``settled`` also requires that no pod is
    still assumed (every bind confirmed by the watch)."""

    def mine(key: str) -> bool:
        return namespace is None or key.startswith(f"{namespace}/")

    cache, out = _read_dump(dump)
    assumed = cache.assumed
    for key in sorted(set(assumed) & set(cache.pending)):
        out.append(f"{key} is both assumed (on {assumed[key]['node']}) and queued")
    if settled:
        for key in sorted(k for k in assumed if mine(k)):
            out.append(f"{key} is still assumed on {assumed[key]['node']} (not confirmed)")

    bound: dict[str, str] = {}
    for pod in api_pods:
        key = _key(pod)
        if not mine(key) or pod.get("status", {}).get("phase") in TERMINAL:
            continue
        node_name = pod.get("spec", {}).get("nodeName") or ""
        if node_name:
            bound[key] = node_name
            out.extend(_bound_pod_mismatch(cache, key, node_name, pod))
        else:
            out.extend(_unbound_pod_mismatch(cache, key, pod, scheduler_name))

    for key, node in sorted(cache.node_of.items()):
        if not mine(key) or key in bound:
            continue
        if key in assumed and not settled:
            continue
        out.append(f"{key} is in the cache on {node} but not bound there in the API")

    if api_nodes is not None:
        out.extend(_node_mismatches(dump, api_nodes))
    return out


def _bound_pod_mismatch(
    cache: _Cache, key: str, node_name: str, pod: Mapping[str, Any]
) -> list[str]:
    """A pod the API has bound: cached on that node, with its uid."""
    if key not in cache.node_of:
        return [f"{key} is bound to {node_name} in the API but not in the cache"]
    if cache.node_of[key] != node_name:
        return [f"{key} is bound to {node_name} but cached on {cache.node_of[key]}"]
    if cache.uid_of[key] != pod["metadata"].get("uid", cache.uid_of[key]):
        return [f"{key} is cached with a stale uid"]
    return []


def _unbound_pod_mismatch(
    cache: _Cache, key: str, pod: Mapping[str, Any], scheduler_name: str
) -> list[str]:
    """A pod still unbound in the API: if it is the scheduler's (and not being deleted),
    queued, assumed or mid-cycle, with a reason once it has been tried."""
    if pod.get("spec", {}).get("schedulerName", "default-scheduler") != scheduler_name:
        return []
    if pod["metadata"].get("deletionTimestamp"):
        return []
    if key in cache.assumed or pod["metadata"].get("uid") in cache.in_flight:
        return []
    queued = cache.pending.get(key)
    if queued is None:
        return [f"{key} is unbound in the API and neither queued nor assumed (lost)"]
    cond = _scheduled_condition(pod)
    tried = queued["attempts"] > 0 or queued["pool"] == "gated"
    if (
        tried
        and not queued["reason"]
        and not (cond and cond.get("status") == "False" and cond.get("message"))
    ):
        return [f"{key} is pending without a reason ({queued['pool']})"]
    return []


def _node_mismatches(dump: Mapping[str, Any], api_nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The cache's present nodes against the API's, with their ``unschedulable``."""
    out: list[str] = []
    api = {n["metadata"]["name"]: bool(n.get("spec", {}).get("unschedulable")) for n in api_nodes}
    present = {n["name"]: bool(n["unschedulable"]) for n in dump["nodes"] if n["present"]}
    for name in sorted(set(api) - set(present)):
        out.append(f"node {name} is in the API but not in the cache")
    for name in sorted(set(present) - set(api)):
        out.append(f"node {name} is in the cache but not in the API")
    for name in sorted(set(api) & set(present)):
        if api[name] != present[name]:
            out.append(f"node {name}: unschedulable {api[name]} in the API, {present[name]} cached")
    return out


def assert_cache_matches_api(
    scheduler_url: str,
    rest_client: RestClient,
    scheduler_name: str = "kubesched",
    *,
    namespace: str | None = None,
    nodes: bool = True,
    settled: bool = True,
    within: float = 30.0,
) -> JSON:
    """Poll until the scheduler's cache agrees with the API server (see the module
    docstring); raise AssertionError listing the differences if it does not within
    ``within`` seconds. Returns the last dump."""
    deadline = time.monotonic() + within
    while True:
        dump = fetch_cache(scheduler_url)
        pods = rest_client.list("v1", "Pod", namespace)
        api_nodes = rest_client.list("v1", "Node") if nodes else None
        problems = cache_mismatches(
            dump, pods, api_nodes, scheduler_name, namespace=namespace, settled=settled
        )
        if not problems:
            return dump
        if time.monotonic() > deadline:
            raise AssertionError(
                "kubesched's cache does not match the API server:\n  " + "\n  ".join(problems)
            )
        time.sleep(0.2)
