"""Builders and names shared by the random cluster kinds (:mod:`tests.e2e.random_clusters`)."""

from __future__ import annotations

import os
import random
from typing import Any

JSON = dict[str, Any]


def _seeds() -> range:
    chosen = os.environ.get("KUBESCHED_RANDOM_SEEDS", "")
    if chosen:
        first, _, count = chosen.partition(":")
        return range(int(first), int(first) + int(count or 1))
    return range(16)


SEEDS = _seeds()
"""Seeds tried for each kind (``test_random_differential``: 16 each, about five minutes
for the eight kinds) and for the gangs (``test_random_gangs``);
``KUBESCHED_RANDOM_SEEDS=first:count`` chooses others."""

POD = "default/p"
"""The pod each cluster schedules."""

ZONES = ("a", "b", "c")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def node_doc(name: str, labels: dict[str, str], spec: JSON, capacity: dict[str, str]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": capacity},
    }


def pod_doc(name: str, spec: JSON, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def container(requests: dict[str, str]) -> JSON:
    """The one container of a generated pod, asking ``requests``."""
    return {"name": "c", "image": "busybox", "resources": {"requests": requests}}


def affinity_term(rng: random.Random, apps: tuple[str, ...]) -> JSON:
    return {
        "topologyKey": rng.choice((HOSTNAME, ZONE)),
        "labelSelector": {"matchLabels": {"app": rng.choice(apps)}},
    }
