"""The hardening headers, and admin pages that keep to their Content-Security-Policy.

The policy allows scripts and styles from our own origin only, so a page with an inline `style="…"` or an inline
script would look broken in a browser. The crawl below opens what an auditor reaches from the admin index (every
list and the first object's page of each, on the sample data) and finds none.
"""

import re
from urllib.parse import urljoin

import pytest

from memory_app.sample_data import memory_sample_create
from sessions_app.sample_data import sample_data_create
from sessions_app.services.apikeys import tenant_get_or_create

INLINE_STYLE = re.compile(r"<[^>]+\sstyle\s*=", re.IGNORECASE)
STYLE_ELEMENT = re.compile(r"<style\b", re.IGNORECASE)
SCRIPT = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
ADMIN_LINK = re.compile(r'href="(/admin/[^"#]*)"')


def directives(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    return {part.split()[0]: part.strip() for part in header.split(";") if part.strip()}


def inline_code(html: str) -> list[str]:
    """Inline styles and scripts a strict policy blocks (JSON data blocks are not run, so they are allowed)."""
    found = [m.group(0)[:80] for m in INLINE_STYLE.finditer(html)]
    found += [m.group(0)[:80] for m in STYLE_ELEMENT.finditer(html)]
    for attributes in SCRIPT.findall(html):
        if "src=" not in attributes and "application/json" not in attributes:
            found.append(f"<script{attributes}>")
    return found


@pytest.mark.django_db
def test_admin_pages_carry_a_strict_policy_and_the_hardening_headers(staff):
    response = staff.get("/admin/")
    assert response.status_code == 200
    policy = directives(response)
    assert policy["default-src"] == "default-src 'self'"
    assert policy["script-src"] == "script-src 'self'"  # no inline script, no other host
    assert policy["style-src"] == "style-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"
    assert policy["object-src"] == "object-src 'none'"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert "camera=()" in response.headers["Permissions-Policy"]
    assert "microphone=()" in response.headers["Permissions-Policy"]


@pytest.mark.django_db
def test_every_admin_page_an_auditor_reaches_has_no_inline_style_or_script(staff):
    demo = tenant_get_or_create(name="demo")
    sample_data_create(tenant=demo)
    memory_sample_create(tenant=demo)

    index = staff.get("/admin/").content.decode()
    lists = sorted({link for link in ADMIN_LINK.findall(index) if link.count("/") == 4})  # /admin/<app>/<model>/
    assert len(lists) >= 10
    pages = {"/admin/": index}
    for url in lists:
        response = staff.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        pages[url] = html
        # The first object of the list, when there is one.
        first = re.search(r'<th class="field-[^"]+"><a href="(' + re.escape(url) + r'[^"/]+/change/[^"]*)"', html)
        if first:
            change = urljoin(url, first.group(1))
            page = staff.get(change)
            assert page.status_code == 200, change
            pages[change] = page.content.decode()
    opened_objects = [url for url in pages if url.endswith("/change/")]
    assert len(opened_objects) >= 8, opened_objects
    # The views of their own that lists and objects link to: dashboard, timeline, chat, similar records, run form.
    views = {
        link.split("?")[0]
        for html in list(pages.values())
        for link in ADMIN_LINK.findall(html)
        if link.split("?")[0].rstrip("/").rsplit("/", 1)[-1] in ("dashboard", "timeline", "chat", "similar", "run")
    }
    assert {v.rstrip("/").rsplit("/", 1)[-1] for v in views} >= {"dashboard", "timeline", "chat", "similar", "run"}
    for url in views:
        response = staff.get(url)
        assert response.status_code == 200, url
        pages[url] = response.content.decode()
    offenders = {url: found for url, html in pages.items() if (found := inline_code(html))}
    assert offenders == {}


@pytest.mark.django_db
def test_api_docs_run_their_start_up_script_by_nonce_and_load_nothing_from_elsewhere(client):
    for url in ("/api/docs/", "/api/redoc/"):
        response = client.get(url)
        assert response.status_code == 200
        html = response.content.decode()
        policy = directives(response)
        nonce = re.search(r"'nonce-([^']+)'", policy["script-src"]).group(1)
        inline = [a for a in SCRIPT.findall(html) if "src=" not in a]
        assert inline and all(f'nonce="{nonce}"' in a for a in inline), url
        assert "'unsafe-inline'" not in policy["script-src"]
        assert not re.search(r'(src|href)="(https?:)?//', html), url  # no other host: fonts, CDNs
    bundle = client.get("/api/redoc/redoc.standalone.js")
    assert bundle.status_code == 200 and bundle["Content-Type"].startswith("text/javascript")
    assert b"Redoc" in bundle.content and b"cdn.redoc.ly" not in bundle.content  # its sidebar logo is not fetched
