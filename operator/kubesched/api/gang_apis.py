"""The three PodGroup APIs' names: their group/versions and the object store's kinds.

Plain constants, no models, so :mod:`kubesched.cluster.kinds` (the kind table) can be
imported before pydantic is (the start-up prefetch, :mod:`kubesched.cluster.prefetch`,
reads it while the rest is still importing). :mod:`kubesched.api.gangs` re-exports them
with the models that parse these APIs.
"""

from __future__ import annotations

import enum

__all__ = ["STORE_KINDS", "WORKLOAD_STORE_KIND", "GangAPI"]


class GangAPI(enum.StrEnum):
    KUBESCHED = "kubesched.dev/v1alpha1"
    UPSTREAM = "scheduling.k8s.io/v1beta1"
    SCHEDULER_PLUGINS = "scheduling.x-k8s.io/v1alpha1"

    @property
    def group(self) -> str:
        return self.value.partition("/")[0]


STORE_KINDS: dict[GangAPI, str] = {
    GangAPI.KUBESCHED: "PodGroup",
    GangAPI.UPSTREAM: "PodGroup.scheduling.k8s.io",
    GangAPI.SCHEDULER_PLUGINS: "PodGroup.scheduling.x-k8s.io",
}
"""The object store's kind for each API's PodGroup (ours keeps plain ``PodGroup``)."""
WORKLOAD_STORE_KIND = "Workload.scheduling.k8s.io"
