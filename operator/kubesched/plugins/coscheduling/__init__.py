"""Coscheduling: gang scheduling with PodGroups, all-or-nothing, without partial binds.

See :mod:`.plugin` for the semantics; the whole-group cycle that places a gang is
:mod:`kubesched.scheduler.gang_cycle`.
Part of kubesched's default profile (after kube-scheduler's defaults; its QueueSort
replaces PrioritySort, ordering pods outside gangs exactly as PrioritySort does).
"""

from kubesched.plugins.coscheduling.plugin import NAME, Args, Coscheduling, GangReport, new

__all__ = ["NAME", "Args", "Coscheduling", "GangReport", "new"]
