"""The pages around the admin and the API: the landing page, the favicon, the documentation, the API's schema."""

import re

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

from platform_kit.site import DOC_PAGES, doc_url
from tests.test_security_headers import inline_code

HREF = re.compile(r'href="([^"]*)"')


def test_the_landing_page_says_what_this_is_and_links_to_everything(client):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Open ACE" in html and "long-term memory" in html
    links = set(HREF.findall(html))
    assert {"/admin/", "/api/docs/", "/api/redoc/", "/api/schema/", "/healthz", "/docs/"} <= links
    assert {doc_url(page) for page in DOC_PAGES.values() if page and page != "bench"} <= links
    assert '<link rel="icon"' in html
    assert inline_code(html) == []
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_the_favicon_is_an_icon_not_a_404(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("aceproject/favicon.ico")
    icon = open(finders.find("aceproject/favicon.ico"), "rb").read()
    assert icon[:4] == b"\x00\x00\x01\x00" and icon[4] == 3  # an ICO file with three sizes
    assert b"<svg" in open(finders.find("aceproject/favicon.svg"), "rb").read()


def test_the_documentation_is_served_and_its_links_stay_inside_it(client):
    pages = {}
    for page in DOC_PAGES.values():
        response = client.get(doc_url(page))
        assert response.status_code == 200, page
        pages[doc_url(page)] = response.content.decode()
    ids = {url: set(re.findall(r'<h[1-6] id="([^"]+)"', html)) for url, html in pages.items()}
    for url, html in pages.items():
        assert inline_code(html) == [], url  # table alignment is a class, not a style
        for href in HREF.findall(html):
            assert not re.match(r"^(https?:)?//", href), (url, href)  # self-contained: no other host
            target, _, anchor = href.partition("#")
            if target.startswith("/docs/"):
                assert target in pages, (url, href)
                assert not anchor or anchor in ids[target], (url, href)
            elif not target:  # a section of the same page
                assert anchor in ids[url], (url, href)
    assert "Your first hour" in pages["/docs/"]
    on_disk = {f"docs/{path.name}" for path in (settings.BASE_DIR / "docs").glob("*.md")}
    assert on_disk <= set(DOC_PAGES)  # a new document is served too
    assert client.get("/docs/no-such-page/").status_code == 404


def test_admin_pages_name_the_icon_and_leave_the_width_to_the_lists(admin_client):
    html = admin_client.get("/admin/sessions_app/session/").content.decode()
    assert '<link rel="icon"' in html
    assert 'id="nav-sidebar"' not in html


@pytest.mark.django_db
def test_the_api_schema_names_its_security_scheme_once_and_describes_the_whole_api(client):
    schema = client.get("/api/schema/?format=json").json()
    operations = [op for path in schema["paths"].values() for op in path.values()]
    assert operations and all(op["security"] == [{"ApiKey": []}] for op in operations)
    assert list(schema["components"]["securitySchemes"]) == ["ApiKey"]
    description = schema["info"]["description"]
    for topic in ("Sessions", "state", "chat turns", "imports", "stats", "records", "recall", "context", "strategies"):
        assert topic.lower() in description.lower(), topic
