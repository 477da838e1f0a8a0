"""The admin, the API docs and the landing page as a person sees them: in Chromium, at 1400 pixels.

A browser (Debian's Chromium with the Noto CJK fonts, driven by Playwright; `.ci/run` installs both) logs in
and opens every page an auditor reaches: the landing page, every admin list and the first object of each, the
views those link to (the usage dashboard, a session's timeline, a conversation's chat, similar records, the
run form), the documentation and the API docs. The data is what a real team leaves (tests/support/realistic_usage.py:
two tenants, 16 months, 120-character project paths, long English and Chinese names, a dozen models).

Any console error, failed request (or 4xx/5xx answer) or request to another host fails the test, and so does
an admin page wider than the window, a list or dashboard table with a column outside the visible part of the
page, or a table cell whose text wraps onto a second line (a tool name, a date, a number cut in two).
Screenshots of the main pages are kept in $ACE_SCREENSHOT_DIR (default `artifacts/screenshots/`), which CI
keeps as an artifact.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ingest_app.models import ImportSource
from ingest_app.pipeline import import_source_scan
from memory_app.sample_data import memory_sample_create
from sessions_app.sample_data import sample_data_create
from sessions_app.services.apikeys import tenant_get_or_create
from strategies_app.models import StrategyRun
from tests.support.agent_logs import DATA
from tests.support.realistic_usage import SECOND_TENANT, realistic_usage_create

CHROMIUM = Path(os.environ.get("ACE_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(
    os.environ.get("ACE_SCREENSHOT_DIR", Path(__file__).resolve().parent.parent / "artifacts/screenshots")
)
WIDTH = 1400
ADMIN_LIST = re.compile(r"^/admin/[a-z_]+/[a-z_]+/$")
# Views of their own that lists and objects link to.
OWN_VIEWS = ("dashboard", "timeline", "chat", "similar", "run")
# The pages whose screenshots a reviewer looks at: (file name, how to recognise the page's path).
SHOTS = {
    "home": re.compile(r"^/$"),
    "admin-index": re.compile(r"^/admin/$"),
    "sessions": re.compile(r"^/admin/sessions_app/session/$"),
    "session": re.compile(r"^/admin/sessions_app/session/[^/]+/change/$"),
    "timeline": re.compile(r"/timeline/$"),
    "chat": re.compile(r"/chat/$"),
    "conversations": re.compile(r"^/admin/sessions_app/conversation/$"),
    "messages": re.compile(r"^/admin/sessions_app/message/$"),
    "turns": re.compile(r"^/admin/sessions_app/turn/$"),
    "turn": re.compile(r"^/admin/sessions_app/turn/[^/]+/change/$"),
    "usage-dashboard": re.compile(r"/dashboard/$"),
    "usage-hourly": re.compile(r"^/admin/sessions_app/usagehourly/$"),
    "usage-daily": re.compile(r"^/admin/sessions_app/usagedaily/$"),
    "telemetry-records": re.compile(r"^/admin/ingest_app/telemetryrecord/$"),
    "llm-requests": re.compile(r"^/admin/sessions_app/llmrequest/$"),
    "model-prices": re.compile(r"^/admin/sessions_app/modelprice/$"),
    "imported-files": re.compile(r"^/admin/ingest_app/importedfile/$"),
    "import-sources": re.compile(r"^/admin/ingest_app/importsource/$"),
    "records": re.compile(r"^/admin/memory_app/record/$"),
    "record": re.compile(r"^/admin/memory_app/record/[^/]+/change/$"),
    "strategy-runs": re.compile(r"^/admin/strategies_app/strategyrun/$"),
    "strategy-run": re.compile(r"^/admin/strategies_app/strategyrun/[^/]+/change/$"),
    "docs": re.compile(r"^/docs/$"),
    "api-docs": re.compile(r"^/api/docs/$"),
    "api-redoc": re.compile(r"^/api/redoc/$"),
}
# Pages taken whole (the rest as the window shows them).
FULL_PAGE = ("usage-dashboard", "usage-dashboard-tenant")
# Columns that end right of what a list or a dashboard table shows (its scrolling box, or the window).
HIDDEN_COLUMNS = """() => {
  const hidden = [];
  for (const table of document.querySelectorAll('#result_list, .ace-table table')) {
    const box = table.closest('.results, .ace-table') || table.parentElement;
    const visible = Math.min(box.getBoundingClientRect().right, document.documentElement.clientWidth);
    for (const th of table.querySelectorAll('thead th')) {
      if (th.getBoundingClientRect().right > visible + 1) hidden.push(th.innerText.trim() || th.className);
    }
  }
  return hidden;
}"""
# How much wider than the window the page is (a horizontal scroll bar of the whole page), in pixels.
PAGE_OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
# Table cells (lists, the dashboard's tables) whose text wraps onto another line: more line boxes than the same
# cell has when it may not wrap (a line break of its own, as a strategy's triggers have, is no wrap).
WRAPPED_CELLS = """() => {
  const lines = cell => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const rects = [...range.getClientRects()].filter(r => r.width > 0 && r.height > 0).sort((a, b) => a.top - b.top);
    let count = 0, bottom = -Infinity;
    for (const r of rects) {
      if (r.top >= bottom - 2) { count += 1; bottom = r.bottom; } else { bottom = Math.max(bottom, r.bottom); }
    }
    return count;
  };
  const wrapped = [];
  const cells = document.querySelectorAll('#result_list td, #result_list tbody th, .ace-table td, .ace-table th');
  for (const cell of cells) {
    const shown = lines(cell);
    if (shown < 2) continue;
    const before = cell.style.whiteSpace;
    cell.style.whiteSpace = 'nowrap';
    const unwrapped = lines(cell);
    cell.style.whiteSpace = before;
    if (shown > unwrapped) wrapped.push(cell.innerText.trim().slice(0, 50));
  }
  return wrapped;
}"""


# True when two Chinese characters are drawn differently from each other and from a character no font has.
DRAWS_CHINESE = """() => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 40;
  const context = canvas.getContext('2d');
  context.font = '32px sans-serif';
  const draw = text => {
    context.clearRect(0, 0, 40, 40);
    context.fillText(text, 2, 34);
    return context.getImageData(0, 0, 40, 40).data.join(',');
  };
  const missing = draw(String.fromCodePoint(0x10FFFD));
  return draw('南') !== missing && draw('京') !== missing && draw('南') !== draw('京');
}"""


@pytest.fixture
def sample_data(transactional_db, burst, django_user_model):
    """ace_bootstrap's sample data, with the strategy runs (and the other work) it queues, run."""
    demo = tenant_get_or_create(name="demo")
    sample_data_create(tenant=demo)
    memory_sample_create(tenant=demo)
    realistic_usage_create(tenant=demo)
    # Agent logs of every tool (and a file that is no tool's), imported by a source as the collector does.
    source = ImportSource.objects.create(tenant=demo, path=str(DATA), user_id="dev")
    assert import_source_scan(source=source).files_imported > 0
    burst()
    assert StrategyRun.objects.filter(tenant=demo, status="succeeded").exists()
    django_user_model.objects.create_superuser("auditor", "auditor@example.com", "browse-the-admin-1")


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        message = f"no Chromium at {CHROMIUM}: apt-get install chromium fonts-noto-cjk (.ci/run does)"
        if os.environ.get("ACE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # Playwright's event loop makes Django's ORM refuse to run in this thread while the browser is open; the
    # test reads no model then (the live server answers from its own thread).
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


class Visit:
    """One browser tab that records what went wrong on each page it opens."""

    def __init__(self, browser, base: str):
        self.base = base
        self.host = urlsplit(base).netloc
        self.page = browser.new_page(viewport={"width": WIDTH, "height": 900}, locale="en-US")
        self.problems: list[str] = []
        self.layout: list[str] = []
        self.opened: list[str] = []
        page = self.page
        page.on("console", lambda m: m.type == "error" and self.problem(f"console: {m.text}"))
        page.on("pageerror", lambda error: self.problem(f"script error: {error}"))
        # A request cut short because the test moved on to the next page (ERR_ABORTED) is no failure; an
        # error answer is caught by its status below, a request the policy blocks by the console.
        page.on("requestfailed", lambda r: "ERR_ABORTED" not in r.failure and self.problem(f"failed: {r.url}"))
        page.on("response", lambda r: r.status >= 400 and self.problem(f"{r.status}: {r.url}"))
        page.on("request", lambda r: self.foreign(r.url))

    def problem(self, text: str) -> None:
        self.problems.append(f"{urlsplit(self.page.url).path}: {text}")

    def foreign(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != self.host:
            self.problem(f"request to another host: {url}")

    def open(self, path: str) -> str:
        response = self.page.goto(self.base + path, wait_until="load")
        assert response is not None and response.ok, f"{path}: {response and response.status}"
        self.opened.append(path)
        for name, pattern in SHOTS.items():
            if pattern.search(path) and not (SCREENSHOTS / f"{name}.png").exists():
                self.shoot(name)
        if urlsplit(self.base + path).path.startswith("/admin/"):
            self.check_layout()
        return self.page.content()

    def shoot(self, name: str) -> None:
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=name in FULL_PAGE)

    def check_layout(self) -> None:
        """An admin page fits the window: no page-wide scroll, no column out of sight, no cell on two lines."""
        overflow = self.page.evaluate(PAGE_OVERFLOW)
        if overflow > 1:
            self.layout.append(f"{self.page.url}: the page is {overflow} px wider than the window")
        hidden = self.page.evaluate(HIDDEN_COLUMNS)
        if hidden:
            self.layout.append(f"{self.page.url}: columns off-screen: {hidden}")
        wrapped = self.page.evaluate(WRAPPED_CELLS)
        if wrapped:
            self.layout.append(f"{self.page.url}: {len(wrapped)} cells wrapped, e.g. {wrapped[:4]}")

    def links(self, pattern: re.Pattern) -> list[str]:
        hrefs = self.page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))")
        return sorted({href for href in hrefs if pattern.search(href)})


def test_an_auditor_clicks_through_the_admin_and_the_api_docs(live_server, sample_data, browser):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        old.unlink()
    visit = Visit(browser, live_server.url)
    page = visit.page

    visit.open("/")
    assert visit.links(re.compile(r"^/(admin|api/docs|healthz|docs)/?$")) == [
        "/admin/",
        "/api/docs/",
        "/docs/",
        "/healthz",
    ]
    visit.open("/favicon.ico")

    visit.open("/admin/login/")
    page.fill("#id_username", "auditor")
    page.fill("#id_password", "browse-the-admin-1")
    page.click("input[type=submit]")
    page.wait_for_url(live_server.url + "/admin/")
    visit.opened.append("/admin/")
    page.screenshot(path=str(SCREENSHOTS / "admin-index.png"))
    assert page.locator("#ace-usage-dashboard-link th a").bounding_box()["width"] > 100  # one line, not a letter
    lists = visit.links(ADMIN_LIST)
    assert len(lists) >= 15, lists

    views = set(visit.links(re.compile(r"/(" + "|".join(OWN_VIEWS) + r")/(\?|#|$)")))  # the usage dashboard
    for url in lists:
        visit.open(url)
        views.update(visit.links(re.compile(r"/(" + "|".join(OWN_VIEWS) + r")/(\?|#|$)")))
        first = page.query_selector("#result_list tbody th a")
        if first is not None:
            visit.open(first.get_attribute("href"))
            views.update(visit.links(re.compile(r"/(" + "|".join(OWN_VIEWS) + r")/(\?|#|$)")))
    assert {v.split("?")[0].split("#")[0].rstrip("/").rsplit("/", 1)[-1] for v in views} >= set(OWN_VIEWS)
    for url in sorted(views):
        visit.open(url)

    # The usage dashboard with two tenants shows them all until one is chosen, and remembers the choice.
    dashboard = "/admin/sessions_app/usagehourly/dashboard/"
    visit.open(dashboard)
    assert page.locator("h1").inner_text() == "Usage dashboard · all tenants"
    assert page.locator("#ace-by-tenant_id tbody tr").count() == 2
    page.select_option("#id_tenant", label=SECOND_TENANT)
    page.click(".ace-filters input[type=submit]")
    page.wait_for_load_state("load")
    visit.check_layout()
    visit.shoot("usage-dashboard-tenant")
    visit.open(dashboard)
    assert page.locator("h1").inner_text() == f"Usage dashboard · {SECOND_TENANT}"
    assert page.locator("#id_tenant option:checked").inner_text() == SECOND_TENANT
    # Total tokens include the cache reads, in millions here; a long project shows whole on hover.
    assert page.locator("[data-total=all_tokens]").inner_text().count(",") >= 2
    assert page.locator("#ace-top_tokens td [title^='/']").count() >= 1

    # The strategy run's page is named after its strategy, not its id; the strategy filter names each once.
    visit.open("/admin/strategies_app/strategyrun/")
    filter_names = page.locator("#changelist-filter details:has(summary:text('By strategy')) li a").all_inner_texts()
    assert filter_names and len(filter_names) == len(set(filter_names)), filter_names
    page.click("#result_list tbody th a")
    title = page.locator("#content h2, #content h1").all_inner_texts()
    breadcrumbs = page.locator(".breadcrumbs").inner_text()
    assert re.search(r"(task-progress|facts-experience|user-profile) run of", breadcrumbs), breadcrumbs
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", breadcrumbs + " ".join(title))

    # Chinese is drawn with real glyphs (fonts-noto-cjk), not as the empty boxes of a missing font.
    assert page.evaluate(DRAWS_CHINESE), "no CJK font: apt-get install fonts-noto-cjk"

    # A tool call of the seed's weather session points to its result message.
    visit.open("/admin/sessions_app/session/?q=" + "天气查询")
    page.click("#result_list tbody th a")
    page.click("text=Read the message timeline")
    assert page.locator(".ace-tool-call").count() >= 1
    assert page.locator(".ace-tool-call:has-text('no result recorded')").count() == 0
    assert page.locator(".ace-tool-call a:has-text('message #3')").count() == 1

    visit.open("/docs/")
    for url in visit.links(re.compile(r"^/docs/[a-z-]+/$")):
        visit.open(url)
    for url in ("/api/docs/", "/api/redoc/"):
        visit.open(url)
        page.wait_for_selector(".opblock-tag, .menu-content", timeout=20_000)  # Swagger UI's or ReDoc's
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(SCREENSHOTS / f"{'api-docs' if 'docs' in url else 'api-redoc'}.png"))

    assert visit.problems == []
    assert visit.layout == [], f"at {WIDTH} px:\n" + "\n".join(visit.layout)
    assert len(visit.opened) >= 50, len(visit.opened)
    assert {f"{name}.png" for name in SHOTS} <= {shot.name for shot in SCREENSHOTS.glob("*.png")}
