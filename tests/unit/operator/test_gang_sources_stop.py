"""A stop of the discovery poll ends the foreign gang kinds' informers with it."""

from __future__ import annotations

import asyncio
from typing import cast

from kubesched.cluster.informer import Informer
from kubesched.cluster.kube import KubeCluster
from kubesched.operator.gang_sources import SOURCES, GangSources


class SlowToEnd:
    """An informer whose watch takes a few steps of the loop to unwind when cancelled
    (a streamed response being released, say)."""

    def __init__(self) -> None:
        self.ended = False

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            for _ in range(5):
                await asyncio.sleep(0)
            self.ended = True


async def test_the_informers_have_ended_when_the_poll_stops() -> None:
    sources = GangSources(cast(KubeCluster, None), lambda *_: None, interval=3600)
    informers = [SlowToEnd() for _ in SOURCES]
    for source, informer in zip(SOURCES, informers, strict=True):
        task = asyncio.ensure_future(informer.run())
        sources.running[source.kind] = (cast(Informer, informer), task)
    poll = asyncio.ensure_future(sources.run())
    await asyncio.sleep(0)
    poll.cancel()
    (ended,) = await asyncio.gather(poll, return_exceptions=True)
    assert isinstance(ended, asyncio.CancelledError)
    # the stop closes the connections next: no informer may still be releasing its own
    assert [i.ended for i in informers] == [True] * len(SOURCES)
    assert sources.running == {}
