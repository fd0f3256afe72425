from __future__ import annotations

from kubesched.framework.cluster_port import NotFound
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Code
from kubesched.plugins import default_binder
from tests.builders import make_pod
from tests.unit.plugins.fakes import FakeHandle


async def test_bind_writes_the_binding(handle: FakeHandle) -> None:
    plugin = default_binder.new(NoArgs(), handle)
    pod = make_pod("web").pod()
    assert await plugin.bind(CycleState(), pod, "n1") is None
    assert handle.cluster.binds == [("default/web", "n1")]


async def test_bind_failure_is_an_error_status(handle: FakeHandle) -> None:
    plugin = default_binder.new(NoArgs(), handle)
    err = NotFound('pods "web" not found')
    handle.cluster.bind_error = err
    status = await plugin.bind(CycleState(), make_pod("web").pod(), "n1")
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message() == 'pods "web" not found'
    assert status.error is err
    assert status.plugin == "DefaultBinder"
    assert handle.cluster.binds == []
