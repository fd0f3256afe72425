"""``kubesched bench``: scheduler throughput and latency, measured the scheduler_perf way.

The workloads themselves are data in ``kubesched.simulator.workloads`` (one plan per
workload and size, used by both targets).

- ``runner``: a run's pod phases (init, gated, measured beside background operations)
  and when a run ends, for either target;
- ``tracker``: what a run saw, turned into figures (throughput samples, latency,
  per-gang latency, per-phase counts);
- ``simulate``: the ``simulate`` target: the scheduler in this process on the in-memory
  cluster, in wall time;
- ``controlplane``: a throw-away etcd + kube-apiserver (binaries from
  ``tests/controlplane/build``), one per measured scheduler;
- ``cluster``: the ``cluster`` target: the plan on a real API server, scheduled by
  ``kubesched run`` and, side by side, by kube-scheduler, both as child processes whose
  CPU and memory are measured;
- ``report``: percentiles, the throughput summary and the output document;
- ``matrix``: every workload at the sizes docs/benchmarks.md shows.

Above the operator layer (it runs ``kubesched run`` as a process) and below the CLI.
"""
