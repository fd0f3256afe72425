"""kubesched.operator: the Kopf operator that runs the scheduler on a real cluster.

``handlers`` turns watch events into cache/queue calls, ``run`` wires the kube adapter,
the scheduler, the Kopf operator, leader election and the HTTP endpoints into one event
loop, ``settings`` is the one model every knob maps onto. This package sits above
``kubesched.cluster`` and below ``kubesched.cli`` (import-linter layers).
"""
