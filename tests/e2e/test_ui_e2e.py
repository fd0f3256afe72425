"""The web view in a real browser: Debian's chromium, driven by Selenium (chromedriver),
against ``kubesched run`` on the real kube-apiserver.

A pod too big for its nodes and a PodGroup with one member missing are created; the page
(``/ui/`` on the metrics port) must show, in the rendered DOM, the pod's reason
(``Insufficient cpu``) on its heat map and the gang's counts (0 bound, 2 waiting, 1
missing). Screenshots go to the test's temporary directory (and to
``KUBESCHED_UI_SCREENSHOTS`` when set). Skipped, saying why, when chromium, chromedriver
or Selenium is absent (CI installs all three: ``.ci/run``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from kubesched.scheduler.cachedump import cache_dump
from tests.controlplane import ControlPlane
from tests.e2e.support import eventually

pytestmark = pytest.mark.timeout(120)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _browser() -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[test]')")
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "no chromium/chromedriver on PATH (apt-get install -y chromium chromium-driver)"
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = _browser()
    try:
        yield driver
    finally:
        driver.quit()


def pod(name: str, namespace: str, pool: dict[str, str], cpu: str, group: str = "") -> Any:
    labels = {"kubesched.dev/pod-group": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": "kubesched",
            "nodeSelector": pool,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                }
            ],
        },
    }


def _wait(driver: Any, within: float) -> Any:
    """A wait that tries again when an element it read was replaced meanwhile: the page
    polls every 2 s and renders in place, so an element found before a render and read
    after it is stale."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver, within, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
    )


def _wait_text(driver: Any, css: str, text: str, within: float = 20) -> str:
    """The text of the first element matching ``css`` once it contains ``text``."""
    from selenium.webdriver.common.by import By

    def found(d: Any) -> str | bool:
        for el in d.find_elements(By.CSS_SELECTOR, css):
            if text in el.text and el.is_displayed():
                return str(el.text)
        return False

    got = _wait(driver, within).until(found, message=f"no visible {css!r} containing {text!r}")
    return str(got)


def _read_row(driver: Any, css: str, parts: tuple[str, ...], within: float = 20) -> tuple[str, ...]:
    """The texts of ``parts`` (selectors) in the first element matching ``css``, read in
    one go from one render of it."""
    from selenium.webdriver.common.by import By

    def read(d: Any) -> tuple[str, ...]:
        row = d.find_element(By.CSS_SELECTOR, css)
        return tuple(str(row.find_element(By.CSS_SELECTOR, p).text) for p in parts)

    got: tuple[str, ...] = _wait(driver, within).until(read, message=f"no {css!r} to read")
    return got


def _save(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    assert driver.save_screenshot(str(path)), f"screenshot {path} not written"
    extra = os.environ.get("KUBESCHED_UI_SCREENSHOTS")
    if extra:
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(extra) / name)
    return path


async def test_the_page_shows_why_a_pod_is_pending_and_a_gangs_counts(
    controlplane: ControlPlane,
    namespace: str,
    kubesched: Runtime,
    browser: Any,
    tmp_path: Path,
) -> None:
    cp = controlplane
    pool = {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:10]}
    await asyncio.to_thread(
        cp.create_nodes, 3, cpu="2", labels=pool, prefix=f"ui-{uuid.uuid4().hex[:6]}-"
    )
    await asyncio.to_thread(cp.api.create, pod("too-big", namespace, pool, cpu="3"))
    group = {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "trio", "namespace": namespace},
        "spec": {"minMember": 3},
    }
    await asyncio.to_thread(cp.api.create, group)
    for i in range(2):
        await asyncio.to_thread(cp.api.create, pod(f"trio-{i}", namespace, pool, "100m", "trio"))
    sched = kubesched.scheduler

    def pools() -> dict[str, str]:
        return {str(d["pod"]): str(d["pool"]) for d in cache_dump(sched)["pending"]}

    key = f"{namespace}/too-big"
    await eventually(
        lambda: pools().get(key) == "unschedulable", within=30, what=key, in_thread=False
    )
    await eventually(
        lambda: pools().get(f"{namespace}/trio-1") == "gated",
        within=30,
        what="gated member",
        in_thread=False,
    )
    base = f"http://127.0.0.1:{kubesched.port}/ui/"

    def why_pending() -> tuple[str, str]:
        browser.get(f"{base}#pod/{key}")
        message = _wait_text(browser, "#explain-message", "Insufficient cpu")
        cell = _wait_text(browser, "#heatmap .cell", "NodeResourcesFit")
        _save(browser, tmp_path, "ui-e2e-pod.png")
        return message, cell

    message, cell = await asyncio.to_thread(why_pending)
    # the shared control plane's other nodes fail the nodeSelector
    assert message.startswith("0/") and "3 Insufficient cpu" in message, message
    assert "NodeResourcesFit" in cell

    def gangs() -> tuple[str, ...]:
        browser.get(f"{base}#gangs")
        row = f'tr[data-gang="{namespace}/trio"]'
        # the members come by kubesched's own watch, the PodGroup by Kopf's, which may
        # trail it: until then the row says the PodGroup is not known (the page polls)
        _wait_text(browser, row, "do not exist yet")
        cells = (".gang-bound", ".gang-waiting", ".gang-missing", ".gang-blocker")
        texts = _read_row(browser, row, cells)
        _save(browser, tmp_path, "ui-e2e-gangs.png")
        return texts

    bound, waiting, missing, blocker = await asyncio.to_thread(gangs)
    assert (bound, waiting, missing) == ("0", "2", "1")
    assert blocker.startswith("1 of minMember 3 member(s) do not exist yet"), blocker

    def queues() -> str:
        browser.get(f"{base}#queues")
        row = _wait_text(browser, f'tr[data-queued="{key}"]', "Insufficient cpu")
        _save(browser, tmp_path, "ui-e2e-queues.png")
        return row

    assert "unschedulable" in await asyncio.to_thread(queues)
    assert (tmp_path / "ui-e2e-pod.png").stat().st_size > 10_000


async def test_kubesched_ui_shows_a_cluster_and_schedules_nothing(
    controlplane: ControlPlane, namespace: str, browser: Any, tmp_path: Path
) -> None:
    cp = controlplane
    pool = {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:10]}
    await asyncio.to_thread(
        cp.create_nodes, 2, cpu="2", labels=pool, prefix=f"ui-{uuid.uuid4().hex[:6]}-"
    )
    await asyncio.to_thread(cp.api.create, pod("fits", namespace, pool, cpu="1"))
    await asyncio.to_thread(cp.api.create, pod("too-big", namespace, pool, cpu="3"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubesched",
        "ui",
        "--kubeconfig",
        str(cp.kubeconfig),
        "--port",
        "0",
        "--refresh",
        "1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith("kubesched: the web view is at http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1].strip()

        def look() -> tuple[str, str]:
            browser.get(f"{url}#pod/{namespace}/too-big")
            message = _wait_text(browser, "#explain-message", "Insufficient cpu")
            browser.get(f"{url}#queues")
            row = _wait_text(browser, f'tr[data-queued="{namespace}/fits"]', "active")
            _save(browser, tmp_path, "ui-e2e-local.png")
            return message, row

        message, row = await asyncio.to_thread(look)
        assert "2 Insufficient cpu" in message, message
        assert "not tried yet" in row  # nothing is scheduled by `kubesched ui`
        got = await asyncio.to_thread(cp.api.read, "v1", "Pod", "fits", namespace)
        assert not got["spec"].get("nodeName"), "kubesched ui bound a pod"
    finally:
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert b"Traceback" not in err, err.decode()
