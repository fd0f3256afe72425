"""DynamicResources: devices through ResourceClaims, as kube-scheduler v1.37's plugin.

See :mod:`.plugin` for the extension points and the places we deliberately differ,
:mod:`.writes` for Reserve, Unreserve, PreBind and the claim writes, :mod:`.tracker` for
what is kept between cycles (in-flight allocations).
"""

from kubesched.plugins.dynamic_resources.plugin import (
    ERR_NOT_AVAILABLE,
    NAME,
    Args,
    DynamicResources,
    new,
)

__all__ = ["ERR_NOT_AVAILABLE", "NAME", "Args", "DynamicResources", "new"]
