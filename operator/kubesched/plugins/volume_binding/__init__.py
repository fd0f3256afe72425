"""VolumeBinding: PVC/PV binding for scheduling, as kube-scheduler v1.37's plugin.

See :mod:`.plugin` for the semantics and the places we deliberately differ.
"""

from kubesched.plugins.volume_binding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from kubesched.plugins.volume_binding.plugin import (
    ERR_REASON_UNBOUND_IMMEDIATE,
    NAME,
    Args,
    VolumeBinding,
    new,
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "NAME",
    "Args",
    "VolumeBinding",
    "new",
]
