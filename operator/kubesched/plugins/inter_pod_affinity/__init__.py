"""InterPodAffinity: required and preferred pod affinity and anti-affinity, with symmetry
for existing pods' anti-affinity, as kube-scheduler v1.37's plugin of that name.

See :mod:`.plugin` for the semantics and the places we deliberately differ.
kube-scheduler's default profile gives this plugin's score weight 2.
"""

from kubesched.plugins.inter_pod_affinity.plugin import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    NAME,
    Args,
    InterPodAffinity,
    new,
)

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "Args",
    "InterPodAffinity",
    "new",
]
