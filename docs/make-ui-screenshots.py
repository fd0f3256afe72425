"""Make docs/ui-*.png: the web view of docs/ui-demo.yaml, live, in headless chromium.

    python docs/make-ui-screenshots.py

A scheduler on the in-memory cluster serves /ui/ on a free local port (as ``kubesched
run`` does) while the scenario's objects arrive in waves, so the queue chart has a
history; then chromium screenshots each view. Needs chromium on PATH.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from pathlib import Path

from aiohttp import web

from kubesched.cluster.memory import MemoryCluster
from kubesched.operator.server import make_app
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.engine import scenario_profiles
from kubesched.simulator.scenario import prepare, read_documents
from kubesched.ui import web as ui_web

DOCS = Path(__file__).parent
WAVES = ["web-", "train-", "gpu-train-", "eval-", "awaiting-quota", "render-farm", "zone-a-cache"]
VIEWS = {"queues": "queues", "gangs": "gangs", "profiles": "profiles", "pod": "pod/ml/gpu-train-0"}


async def main() -> None:
    ui_web.SAMPLE_EVERY = 0.5
    profiles, objects = scenario_profiles(prepare(read_documents(str(DOCS / "ui-demo.yaml"))))
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, profiles=profiles, seed=0)
    cluster.subscribe(EventHandlers(sched, on_bad_object=lambda k, o, m: None).on_event)
    pending = [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    for o in objects:
        if o not in pending:
            cluster.apply(o)
    task = asyncio.create_task(sched.run())
    runner = web.AppRunner(make_app(scheduler=sched, ready=lambda: True, leading=lambda: True))
    await runner.setup()
    sock = socket.create_server(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/ui/"
    await asyncio.sleep(2)
    for prefix in WAVES:
        for o in pending:
            if o["metadata"]["name"].startswith(prefix):
                cluster.apply(o)
        await asyncio.sleep(2.5)
    await asyncio.sleep(3)
    chromium = shutil.which("chromium") or "chromium"
    for name, view in VIEWS.items():
        out = DOCS / f"ui-{name}.png"
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        cmd += ["--window-size=1400,900", "--virtual-time-budget=4000", f"--screenshot={out}"]
        await asyncio.to_thread(
            subprocess.run, [*cmd, f"{url}#{view}"], check=True, capture_output=True
        )
        print(out)
    task.cancel()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
