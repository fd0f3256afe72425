"""The soak (tests/soak.py), one minute on 60 nodes: mixed churn (pods created and
deleted, gangs, nodes added, deleted, cordoned), a kube-apiserver restart and leader
SIGKILLs, two replicas. The full run (10 minutes, 1000 nodes) is in docs/reliability.md.
"""

from __future__ import annotations

import json

import pytest

from tests.controlplane import Binaries
from tests.soak import Soak
from tests.soak_parts import Options

pytestmark = pytest.mark.timeout(480)


def test_a_one_minute_soak_loses_nothing_and_binds_nothing_twice(
    controlplane_binaries: Binaries,
) -> None:
    options = Options(
        minutes=1.0,
        nodes=60,
        pod_rate=5.0,
        pod_lifetime=15.0,
        gang_every=10.0,
        node_churn_every=5.0,
        apiserver_restart_every=30.0,
        leader_kill_every=30.0,
        controlplane_dir=str(controlplane_binaries.etcd.parent),
    )
    summary = Soak(options).run()
    text = json.dumps(summary, indent=2)
    faults = summary["faults_injected"]
    assert faults.get("leader-sigkill", 0) >= 1, text
    assert faults.get("apiserver-restart-kill", 0) >= 1, text
    assert summary["pods_scheduled"] >= 200, text
    assert summary["gangs_created"] >= 3, text
    assert summary["pods_deleted"] > 0, text
    assert summary["pods_lost"] == 0, text
    assert summary["double_binds"] == 0, text
    assert summary["restarts"] == 0, text
    assert summary["cache_mismatches"] == [], text
    assert summary["pods_unbound_at_end"] == 0, text
    assert summary["duplicate_scheduled_events"] == 0, text
    assert summary["ok"], text
