"""``kubesched bench``: scheduler throughput and latency, measured the scheduler_perf way.

- ``controlplane``: a throw-away etcd + kube-apiserver (binaries from
  ``tests/controlplane/build``), one per measured scheduler;
- ``cluster``: the ``cluster`` target: a generated workload on a real API server,
  scheduled by ``kubesched run`` and, side by side, by kube-scheduler, both as child
  processes whose CPU and memory are measured;
- ``report``: percentiles, the throughput summary and the output document.

Above the operator layer (it runs ``kubesched run`` as a process) and below the CLI.
"""
