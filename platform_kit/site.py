"""The pages around the admin and the API: the landing page at `/`, the favicon, and the documentation.

Their templates are the kit's (`platform_kit/templates/platform_kit/`, with the error pages and the overrides
of the admin's and the API docs' pages); their files keep the public paths they have always had,
`/static/aceproject/…` (`platform_kit/static/aceproject/`: browsers keep the favicon's permanent redirect).

The documentation is the repository's own Markdown (README.md, docs/*.md, bench/README.md) rendered as it
is, so the server and the checkout never disagree; links between those files lead to their pages here.
"""

from __future__ import annotations

import functools
import posixpath
import re
import unicodedata

from django.conf import settings
from django.http import Http404, HttpResponsePermanentRedirect
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.http import require_GET
from markdown_it import MarkdownIt

# Each Markdown file served, by its path in the repository, and the page that shows it.
DOC_PAGES = {
    "README.md": "",
    **{
        f"docs/{name}.md": name
        for name in (
            "architecture",
            "api",
            "chat-turns",
            "admin",
            "memory",
            "strategies",
            "rules-extractor",
            "accounting",
            "otel",
            "operations",
            "security",
            "retention",
            "big-tables",
            "scaling",
            "mcp",
            "budgets",
            "webhooks",
            "gateway",
            "portability",
        )
    },  # fmt: skip
    "bench/README.md": "bench",
}
DOC_PATHS = {page: path for path, page in DOC_PAGES.items()}


@require_GET
def home(request):
    """What this is, and where to go: the admin, the API docs, health, the documentation."""
    docs = [(doc_url(DOC_PAGES[path]), doc_title(path)) for path in DOC_PAGES if path.startswith("docs/")]
    return render(request, "platform_kit/home.html", {"docs": docs, "readme_url": doc_url("")})


@require_GET
def favicon(request):
    """Browsers ask for /favicon.ico on every page that names no icon (the API's JSON, for one)."""
    return HttpResponsePermanentRedirect(static("aceproject/favicon.ico"))


def doc_url(page: str) -> str:
    return f"/docs/{page}/" if page else "/docs/"


@require_GET
def doc(request, page: str = ""):
    path = DOC_PATHS.get(page)
    if path is None:
        raise Http404("No such document.")
    title, html = rendered(path)
    return render(request, "platform_kit/doc.html", {"title": title, "body": html, "readme_url": doc_url("")})


def doc_title(path: str) -> str:
    return rendered(path)[0]


@functools.cache
def rendered(path: str) -> tuple[str, str]:
    """The document's first heading and its HTML (kept for the process's life: the files ship with the code)."""
    source = (settings.BASE_DIR / path).read_text(encoding="utf-8")
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(source)
    title = path
    slugs: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[index + 1].children or ()
            text = "".join(child.content for child in inline if child.type in ("text", "code_inline"))
            if title == path:
                title = text
            token.attrSet("id", unique_slug(text, slugs))
        elif token.type in ("th_open", "td_open") and token.attrGet("style"):
            # Column alignment as a class: the Content-Security-Policy allows no inline style.
            align = token.attrGet("style").removeprefix("text-align:")
            token.attrs.pop("style")
            token.attrSet("class", f"align-{align}")
        for child in token.children or ():
            if child.type == "link_open":
                relink(child, path)
    return title, md.renderer.render(tokens, md.options, {})


def relink(token, source: str) -> None:
    """A link to another served document leads to its page; a link to a file that is not served, or outside
    the repository, stays as plain text (its path is in the text)."""
    href = token.attrGet("href") or ""
    if href.startswith("#"):
        return
    target, _, anchor = href.partition("#")
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # another host: the documentation is self-contained
        token.attrs.pop("href")
        return
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), target)) if target else source
    if resolved in DOC_PAGES:
        token.attrSet("href", doc_url(DOC_PAGES[resolved]) + (f"#{anchor}" if anchor else ""))
    else:
        token.attrs.pop("href")


def unique_slug(text: str, seen: dict[str, int]) -> str:
    """GitHub's heading anchors: the heading's text in lower case, punctuation dropped (but `-` and `_`),
    spaces as hyphens, repeats numbered."""
    text = text.strip().lower()
    slug = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM").replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"
