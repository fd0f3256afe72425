"""``kubesched run``'s way to its first bind imports neither the DRA machinery nor the
HTTP server: both are imported when first used (a pod with claims or DRA-backed extended
resources; the server once the cache is synced), so they do not delay the first bind.
A later import that drags one back onto that way fails here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

DEFERRED = (
    "kubesched.framework.dra",  # the allocator, CEL, the claim tracker: ~30 ms
    "kubesched.plugins.dynamic_resources.tracker",
    "kubesched.plugins.dynamic_resources.extended",
    "aiohttp",  # the watches', Kopf's and the server's (~60 ms: kubesched.cluster.aio)
    "kubesched.operator.server",
    "kubesched.operator.delegated_auth",
    "kubesched.ui.web",
    # kubernetes_asyncio's loaders with yaml (~24 ms): the prefetch's login is configured
    # without them (kubesched.cluster.kubeconfig); its OIDC module is a stand-in there
    "kubernetes_asyncio.config.kube_config",
    "kubernetes_asyncio.config.incluster_config",
    "yaml",
)
"""Modules (with their submodules) ``kubesched run`` must not import before it schedules."""

WHY = (
    "imported on kubesched run's way to its first bind again: that delays every start-up "
    "(docs/DESIGN.md, 'Start-up'); import it where it is first used"
)

RUN_IMPORTS = textwrap.dedent(
    """
    # what `kubesched run` imports before its event loop starts (kubesched.cli.main)
    import kubesched.cli, kubesched.cli.early
    kubesched.cli._parser("kubesched", "run")  # imports kubesched.cli.run
    import kubesched.operator.run
    """
)

# A fresh interpreter: in the pytest process other tests have imported everything.
PROBE = (
    textwrap.dedent(
        """
        import asyncio, json, sys

        deferred = json.loads(sys.argv[1])

        def loaded():
            return sorted(
                m for m in sys.modules if any(m == d or m.startswith(d + ".") for d in deferred)
            )
        """
    )
    + RUN_IMPORTS
    + textwrap.dedent(
        """
        after_imports = loaded()

        # then a first cycle with the default profile: a plain pod bound on the in-memory cluster
        from kubesched.cluster.memory import MemoryCluster
        from kubesched.scheduler.eventhandlers import EventHandlers
        from kubesched.scheduler.scheduler import Scheduler

        async def first_bind():
            cluster = MemoryCluster()
            sched = Scheduler(cluster, cluster)
            cluster.subscribe(EventHandlers(sched, on_bad_object=print).on_event)
            cluster.apply({
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            })
            cluster.apply({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
                "spec": {"schedulerName": "kubesched", "containers": [{"name": "c", "image": "nginx",
                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
            })
            task = asyncio.create_task(sched.run())
            for _ in range(500):
                if cluster.node_of("default/web"):
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return cluster.node_of("default/web")

        node = asyncio.run(first_bind())
        print(json.dumps({"after_imports": after_imports, "node": node, "after_bind": loaded()}))
        """
    )
)


def test_kubesched_run_defers_dra_and_the_http_server_past_its_first_bind() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(DEFERRED)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["after_imports"] == [], f"{got['after_imports']}: {WHY}"
    assert got["node"] == "n1"  # the probe did schedule (the default profile, DRA included)
    assert got["after_bind"] == [], f"{got['after_bind']}: {WHY}"


# numpy's OpenBLAS, left to itself, starts a worker thread per core as numpy loads, and
# each spins for about 0.1 s of CPU (kubesched/__init__.py): on two cores shared with the
# API server, CPU taken from it at every start.
THREADS = RUN_IMPORTS + textwrap.dedent(
    """
    import json, os, threading
    import numpy
    native = len(os.listdir("/proc/self/task")) - threading.active_count()
    print(json.dumps({"native": native, "value": os.environ.get("OPENBLAS_NUM_THREADS")}))
    """
)


def _threads(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", THREADS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or len(os.sched_getaffinity(0)) < 2,
    reason="counts a process's threads in /proc (Linux) on a machine of two cores or more, "
    "where OpenBLAS would start a worker per core",
)
def test_kubesched_starts_no_blas_worker_threads_unless_the_user_asks() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    assert _threads(env) == {"native": 0, "value": "1"}
    # a value the user set is theirs: kept, and OpenBLAS starts its workers
    got = _threads({**env, "OPENBLAS_NUM_THREADS": "2"})
    assert got["value"] == "2"
    assert got["native"] == 1
