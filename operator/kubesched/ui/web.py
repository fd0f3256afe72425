"""Serving the web view: ``/ui/`` (the page), ``/ui/api/state`` and
``/ui/api/explain/{namespace}/{name}`` (its JSON), and the page as one file.

:func:`add_routes` adds the three routes to an aiohttp application; in ``kubesched
run`` that is the metrics server's application, so its authentication middleware guards
``/ui/`` like every other path. The page is ``static/page.html`` with its CSS and script
inlined (no build step, no file besides the page): :func:`render_page` with a state
writes a snapshot that needs no server (``kubesched simulate --html``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any, Protocol

import orjson
from aiohttp import web

from kubesched.framework.types import ObjectError
from kubesched.profile_status import ProfileBook
from kubesched.scheduler.scheduler import Scheduler
from kubesched.ui import collect
from kubesched.ui.shape import QueueHistory

__all__ = ["SAMPLE_EVERY", "SchedulerSource", "UiSource", "add_routes", "render_page"]

log = logging.getLogger("kubesched.ui")


class UiSource(Protocol):
    """Where the page's facts come from."""

    def state(self) -> dict[str, Any]: ...

    def explain(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def sample(self) -> None:
        """Record the queue sizes now (called every ``SAMPLE_EVERY`` seconds)."""


SAMPLE_EVERY = 2.0
"""Seconds between two samples of the queue sizes: 240 samples (the history kept) span
8 minutes, and counting the queues costs one pass over the pending pods."""


class SchedulerSource:
    """A scheduler in this process: ``kubesched run``'s, or ``kubesched ui``'s in-memory
    copy of a cluster (``scheduler`` is looked up on each request, so it may be replaced).
    ``profile_book``: ``kubesched run``'s SchedulingProfiles and their status."""

    def __init__(
        self,
        scheduler: Callable[[], Scheduler],
        *,
        source: str,
        clock: Callable[[], float] = time.time,
        profile_book: Callable[[], ProfileBook | None] = lambda: None,
    ) -> None:
        self._scheduler = scheduler
        self._book = profile_book
        self._source = source
        self._clock = clock
        self.history = QueueHistory()

    def state(self) -> dict[str, Any]:
        return collect.state(
            self._scheduler(),
            self.history,
            now=self._clock(),
            source=self._source,
            profile_book=self._book(),
        )

    def explain(self, namespace: str, name: str) -> dict[str, Any] | None:
        return collect.explain_for(self._scheduler(), namespace, name)

    def sample(self) -> None:
        self.history.record(self._clock(), collect.queue_counts(self._scheduler()))


def _asset(name: str) -> str:
    return (resources.files("kubesched.ui") / "static" / name).read_text(encoding="utf-8")


def render_page(state: dict[str, Any] | None = None) -> str:
    """The page, self-contained. With ``state`` it shows that state and polls nothing;
    without, it polls ``api/state`` (relative to ``/ui/``)."""
    embedded = "null" if state is None else orjson.dumps(state).decode()
    # In a <script> element, "</" could end it early: JSON allows "<\/".
    embedded = embedded.replace("</", "<\\/")
    page = _asset("page.html")
    return (
        page.replace("/*CSS*/", _asset("page.css"))
        .replace("/*STATE*/", embedded)
        .replace("/*JS*/", _asset("page.js"))
    )


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(doc), status=status, content_type="application/json")


def add_routes(app: web.Application, source: UiSource) -> None:
    """``/ui/`` and its JSON on ``app`` (read-only: GET only)."""
    page = render_page()

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html", charset="utf-8")

    async def to_index(request: web.Request) -> web.Response:
        raise web.HTTPFound("/ui/")

    async def api_state(request: web.Request) -> web.Response:
        return _json(source.state())

    async def api_explain(request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        try:
            view = source.explain(ns, name)
        except LookupError as e:  # no profile serves its schedulerName
            return _json({"error": f"pod {ns}/{name}: {e}"}, 422)
        except ObjectError as e:
            return _json({"error": f"pod {ns}/{name}: {e}"}, 422)
        if view is None:
            return _json({"error": f"pod {ns}/{name} not found"}, 404)
        return _json(view)

    async def sampling(app: web.Application) -> AsyncIterator[None]:
        # The queue sizes over time are recorded whether or not anyone looks.
        async def loop() -> None:
            while True:
                try:
                    source.sample()
                except Exception:  # a view must never take the server down
                    log.exception("sampling the queue sizes failed")
                await asyncio.sleep(SAMPLE_EVERY)

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(sampling)
    app.router.add_get("/ui", to_index)
    app.router.add_get("/ui/", index)
    app.router.add_get("/ui/api/state", api_state)
    app.router.add_get("/ui/api/explain/{namespace}/{name}", api_explain)
