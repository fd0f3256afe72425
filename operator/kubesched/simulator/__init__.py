"""``kubesched simulate``: the scheduler on an in-memory cluster built from manifests.

``scenario`` reads, validates and defaults multi-document YAML scenarios;
``workloads`` generates benchmark clusters modelled on kube-scheduler's scheduler_perf;
``engine`` runs the scheduler over the result. Nothing here touches a real cluster.
"""
