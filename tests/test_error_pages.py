"""Error pages with DEBUG off: a person gets the site's pages (its header, links home, to the admin and the docs);
a machine's paths (the API, the OTLP receiver) keep answering JSON `{"detail": …}`."""

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import include, path

import aceproject.urls


def broken(request):
    raise RuntimeError("a bug in a page")


def forbidden(request):
    raise PermissionDenied


# This module is the URL configuration of its tests: the project's, with a page that fails and one that refuses.
urlpatterns = [
    path("broken-page/", broken),
    path("api/v1/broken/", broken),
    path("forbidden-page/", forbidden),
    path("", include(aceproject.urls.urlpatterns)),
]
handler404 = aceproject.urls.handler404
handler500 = aceproject.urls.handler500

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


@pytest.fixture(autouse=True)
def no_debug(settings):
    settings.DEBUG = False


def looks_like_the_site(html: str) -> bool:
    return (
        'class="site-header"' in html
        and "/static/aceproject/site.css" in html
        and all(f'href="{link}"' in html for link in ("/", "/admin/", "/api/docs/", "/docs/"))
    )


def test_a_missing_page_is_the_sites_404(client):
    response = client.get("/no-such-page/")
    html = response.content.decode()
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
    assert "Nothing here" in html and looks_like_the_site(html)
    assert "<code>/no-such-page/</code>" in html
    missing_doc = client.get("/docs/no-such-guide/")  # a 404 raised by a view, not by the URLs
    assert missing_doc.status_code == 404 and looks_like_the_site(missing_doc.content.decode())


@pytest.mark.parametrize(
    "address",
    ["/api/v1/nonexistent/", "/api/v1/sessions/not-a-uuid/", "/api/nothing", "/v1/nonexistent"],
)
def test_machine_paths_keep_answering_json_404(api, address):
    response = api.get(address)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert set(response.json()) >= {"detail"} and response.json()["detail"]


def test_a_page_that_fails_is_the_sites_500_and_the_api_stays_json():
    from django.test import Client

    client = Client(raise_request_exception=False)
    page = client.get("/broken-page/")
    html = page.content.decode()
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")
    assert "Something went wrong on our side" in html and looks_like_the_site(html)
    assert page["X-Request-ID"] and page["X-Request-ID"] in html  # what to tell the administrator
    api = client.get("/api/v1/broken/")
    assert api.status_code == 500 and api["Content-Type"] == "application/json"
    body = api.json()
    assert body["request_id"] == api["X-Request-ID"] and body["request_id"] in body["detail"]
    assert body["errors"] == {}


def test_a_refused_page_is_the_sites_403(client):
    response = client.get("/forbidden-page/")
    html = response.content.decode()
    assert response.status_code == 403 and "Not allowed" in html and looks_like_the_site(html)


def test_a_form_sent_without_its_csrf_token_gets_the_sites_page():
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post("/admin/login/", {"username": "a", "password": "b"})
    html = response.content.decode()
    assert response.status_code == 403 and "This form has expired" in html and looks_like_the_site(html)
