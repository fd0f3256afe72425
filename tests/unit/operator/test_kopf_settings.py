"""kopf_settings: Kopf's per-event diffbase essence is skipped for the kinds it only watches."""

from __future__ import annotations

import kopf

from kubesched.operator.kopf_runner import kopf_settings
from kubesched.operator.settings import Settings


def test_no_essence_for_watched_core_kinds_but_the_real_one_for_crds() -> None:
    storage = kopf_settings(Settings(leader_elect=False)).persistence.diffbase_storage
    pod = kopf.Body(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c"}]},
        }
    )
    assert storage.build(body=pod) == {}
    profile = kopf.Body(
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": "x"},
            "spec": {"schedulerName": "s"},
        }
    )
    assert storage.build(body=profile)["spec"] == {"schedulerName": "s"}
    assert storage.fetch(body=profile) is None  # nothing handled yet: a creation


def test_tune_garbage_collector_raises_thresholds_and_freezes_what_exists() -> None:
    import gc

    from kubesched.operator.run import GC_THRESHOLDS, tune_garbage_collector

    before = gc.get_threshold()
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
