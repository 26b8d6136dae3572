"""Take the screenshots of the Dagster UI shown in docs/dagster.md: ``python docs/screenshots.py`` (by hand, not in CI).

It starts the demo provider (``sharesync demo``'s tables on the local sharing server), syncs
twice through the Dagster definitions into a fresh Dagster instance (the provider commits in
between, so the plots have two points and the second run has changes), starts
``dagster-webserver`` on that instance, and photographs pages with headless Chromium
(Debian's ``chromium`` package: ``apt-get install -y chromium``), driven over the DevTools
protocol (``websockets``, installed with Dagster's webserver) because the metadata plots are
one click away. The PNGs land in ``docs/images/``. Look at each one: an empty plot or an
unreadable value is a metadata bug.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import yaml

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "images"
BIN = Path(sys.executable).parent
ORDERS = "sharesync/demo/sales/orders"
# The overview's metadata section has a Table / Plots toggle; the plots are below the fold.
METADATA_FILTER = "document.querySelector('input[placeholder=\"Filter metadata keys\"]')"
CLICK_PLOTS = "[...document.querySelectorAll('button')].find(b => b.textContent.trim() === 'Plots').click()"
# Scrolled to lag_seconds: then lag and rows inserted/updated/deleted are in the picture.
SHOW_PLOTS = "[...document.querySelectorAll('div')].find(d => d.textContent === 'lag_seconds').scrollIntoView()"


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    ready: str  # a JavaScript condition: the page has rendered what the picture is for
    action: str | None = None  # JavaScript run once ``before`` holds (a click); then ``ready`` is waited for
    before: str | None = None
    after: str | None = None  # JavaScript run once ``ready`` holds (a scroll)


PAGES = [
    Page("catalog", "/assets", "document.body.innerText.includes('Materialized')"),
    Page("asset-overview", f"/assets/{ORDERS}?view=overview", "document.body.innerText.includes('Row count')"),
    Page("asset-events", f"/assets/{ORDERS}?view=events", "document.body.innerText.includes('rows_inserted')"),
    Page(
        "asset-plots",
        f"/assets/{ORDERS}?view=overview",
        "document.querySelectorAll('canvas').length >= 6",
        action=CLICK_PLOTS,
        before=METADATA_FILTER,
        after=SHOW_PLOTS,
    ),
    Page("asset-checks", f"/assets/{ORDERS}?view=checks", "document.body.innerText.includes('keys_unique')"),
    Page("lineage", f"/assets/{ORDERS}?view=lineage", "document.body.innerText.includes('Passed')"),
]
LOADED = "{ workspaceOrError { ... on Workspace { locationEntries { loadStatus } } } }"
FRESHNESS = (
    "query ($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) "
    "{ ... on AssetNode { freshnessStatusInfo { freshnessStatus } } } }"
)
NUX_SEEN = "mutation { setNuxSeen }"  # the "Join the Dagster community" dialog would cover every picture
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--window-size=1600,1000", "--remote-debugging-port=0",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMAGES)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sharesync-shots-") as scratch:
        root = Path(scratch)
        with demo_site(root) as config:
            home = dagster_home(root)
            os.environ.update({"DAGSTER_HOME": str(home), "SHARESYNC_CONFIG": str(config)})
            sync_twice(config, root)
            with webserver(home, config) as url, browser(args.chromium, root) as tab:
                with daemon(home):  # its freshness daemon evaluates the freshness policies once
                    wait_for_freshness(url, home)
                for page in PAGES:
                    png = args.out / f"{page.name}.png"
                    png.write_bytes(tab.shoot(url + page.path, page))
                    print(f"{png}: {png.stat().st_size // 1024} KB")


@contextmanager
def demo_site(root: Path) -> Iterator[Path]:
    """The demo provider, served; a config like ``sharesync demo``'s, with a freshness bound."""
    from sharesync.sync.server.runner import SharingServer
    from sharesync.sync.server.samples import build_demo_provider

    build_demo_provider(root / "provider")
    with SharingServer(root / "provider") as server:
        profile = server.write_profile(root / "provider.share")
        config = {
            "profile": str(profile),
            "state_store": "sqlite:///state.db",
            "staging_dir": "staging",
            "defaults": {"freshness_minutes": 60},
            "tables": [
                {"name": "demo.sales.orders", "target": "warehouse/orders", "keys": ["id"]},
                {"name": "demo.sales.customers", "target": "warehouse/customers_changes", "mode": "append"},
            ],
        }
        path = root / "sharesync.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        yield path


def dagster_home(root: Path) -> Path:
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    return home


def sync_twice(config: Path, root: Path) -> None:
    """Observe and sync every table (with its checks), let the provider commit, and again."""
    import dagster as dg

    from sharesync.pipelines.dagster.code_location import load_definitions
    from sharesync.sync.server.samples import apply_random_commits, table_path

    defs = load_definitions(config)
    graph = defs.get_repository_def().asset_graph
    everything = dg.AssetSelection.assets(*graph.get_all_asset_keys())
    with dg.DagsterInstance.get() as instance:
        for round_ in range(2):
            if round_:
                rng = random.Random(11)
                for table in ("orders", "customers"):
                    apply_random_commits(table_path(root / "provider", "demo", "sales", table), rng, 3)
            dg.materialize(
                [*(defs.assets or ()), *(defs.asset_checks or ())],  # type: ignore[list-item]
                selection=everything,
                resources=dict(defs.resources or {}),
                instance=instance,
            )
            if not round_:
                time.sleep(61)  # the plots' x axis is time, labelled by the minute: one minute apart


@contextmanager
def webserver(home: Path, config: Path) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    command = [str(BIN / "dagster-webserver"), "-m", "sharesync.pipelines.dagster.definitions", "-p", str(port)]
    env = {**os.environ, "DAGSTER_HOME": str(home), "SHARESYNC_CONFIG": str(config)}
    log = (home / "webserver.log").open("wb")
    process = subprocess.Popen([*command, "-h", "127.0.0.1"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                answer = httpx.post(f"{url}/graphql", json={"query": LOADED}, timeout=10).json()
                entries = answer["data"]["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    break
            except (httpx.TransportError, KeyError, TypeError):
                pass
            time.sleep(0.5)
        else:
            raise SystemExit(f"dagster-webserver did not load within 120 s; see {home / 'webserver.log'}")
        httpx.post(f"{url}/graphql", json={"query": NUX_SEEN}, timeout=10).raise_for_status()
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@contextmanager
def daemon(home: Path) -> Iterator[None]:
    command = [str(BIN / "dagster-daemon"), "run", "-m", "sharesync.pipelines.dagster.definitions"]
    env = {**os.environ, "FRESHNESS_DAEMON_INTERVAL_SECONDS": "5"}
    with (home / "daemon.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield
        finally:
            process.terminate()
            process.wait(timeout=60)


def wait_for_freshness(url: str, home: Path) -> None:
    deadline = time.monotonic() + 180
    path = ORDERS.split("/")
    while time.monotonic() < deadline:
        answer = httpx.post(f"{url}/graphql", json={"query": FRESHNESS, "variables": {"path": path}}, timeout=10)
        status = answer.json()["data"]["assetNodeOrError"].get("freshnessStatusInfo") or {}
        if status.get("freshnessStatus") not in (None, "UNKNOWN", "NOT_APPLICABLE"):
            return
        time.sleep(1)
    log = (home / "daemon.log").read_text(errors="replace")[-3000:]
    raise SystemExit(f"the freshness daemon did not evaluate the freshness policy within 180 s:\n{log}")


class Tab:
    """One Chromium tab driven over the DevTools protocol: navigate, wait for a condition, click, capture."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = iter(range(1, 1_000_000))

    def call(self, method: str, **params: object) -> dict[str, object]:
        sent = next(self.ids)
        self.ws.send(json.dumps({"id": sent, "method": method, "params": params}))
        while True:
            answer = json.loads(self.ws.recv())
            if answer.get("id") == sent:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer.get("result", {}))

    def true(self, condition: str) -> bool:
        result = self.call("Runtime.evaluate", expression=f"Boolean({condition})", returnByValue=True)
        return bool(dict(result.get("result", {})).get("value"))  # type: ignore[call-overload]

    def wait(self, condition: str, seconds: float = 60) -> None:
        deadline = time.monotonic() + seconds
        while not self.true(condition):
            if time.monotonic() > deadline:
                buttons = "[...document.querySelectorAll('button')].map(b => b.textContent.trim()).join(' | ')"
                shown = self.call("Runtime.evaluate", expression=buttons, returnByValue=True)
                raise SystemExit(f"the page never satisfied: {condition}; buttons: {shown}")
            time.sleep(0.25)

    def shoot(self, url: str, page: Page) -> bytes:
        self.call("Page.navigate", url=url)
        if page.action is not None:
            self.wait(page.before or "true")
            self.call("Runtime.evaluate", expression=page.action)
        self.wait(page.ready)
        if page.after is not None:
            self.call("Runtime.evaluate", expression=page.after)
        time.sleep(2)  # fonts, charts' animation
        shot = self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(str(shot["data"]))


@contextmanager
def browser(chromium: str, root: Path) -> Iterator[Tab]:
    from websockets.sync.client import connect

    profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=root))
    command = [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "DevTools listening on " in line:
                port = line.split("ws://", 1)[1].split("/", 1)[0]
                break
        else:
            raise SystemExit("chromium exited before it listened for DevTools")
        targets = httpx.get(f"http://{port}/json/list", timeout=10).json()
        with connect(next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page"), max_size=None) as ws:
            tab = Tab(ws)
            tab.call("Page.enable")
            tab.call("Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False)
            yield tab
    finally:
        process.terminate()
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
