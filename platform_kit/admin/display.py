"""How the admin shows values (numbers, badges, JSON, text, links to other admin pages) and reads ids back."""

from __future__ import annotations

import json
import unicodedata
import uuid

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import ngettext

BADGE_TONES = ("green", "blue", "purple", "red", "amber", "grey", "slate")  # classes in platform_kit/admin.css
EMPTY = "-"  # as Django's own empty_value_display


def number(value) -> str:
    """Token and message counts with thousands separators: 1234567 → "1,234,567"."""
    return EMPTY if value is None else f"{value:,}"


def counted(value: int, singular: str, plural: str | None = None) -> str:
    """A count with its noun agreeing: 1 → "1 conversation", 1234 → "1,234 conversations"."""
    return f"{number(value)} {ngettext(singular, plural or f'{singular}s', value or 0)}"


def compact(value) -> str:
    """A count in at most four characters: 999 → "999", 12345 → "12.3k", 4567890 → "4.6M"."""
    if value is None:
        return EMPTY
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.1f}{suffix}" if abs(scaled) < 100 else f"{scaled:.0f}{suffix}"
    return str(value)


def file_size(size: int) -> str:
    """Bytes for people: 512 → "512 B", 1536 → "1.5 KB", 3_400_000 → "3.2 MB"."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def hint(text, whole: str):
    """`text` with `whole` on hover (a dotted underline says there is more)."""
    if not whole or whole == str(text):
        return text
    return format_html('<span class="ace-hint" title="{}">{}</span>', whole, text)


def count_hint(value, *parts: tuple[str, int | None]):
    """A compact count, with the exact figure and a breakdown (`parts`: label, value) on hover."""
    if value is None:
        return EMPTY
    details = " · ".join(f"{number(part)} {label}" for label, part in parts if part)
    return hint(compact(value), f"{number(value)}: {details}" if details else number(value))


def width(text: str) -> int:
    """How many columns text takes on screen: Chinese, Japanese and Korean characters count twice."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def truncated(text: str | None, chars: int):
    """`text` on one line, cut to the width of `chars` Latin characters, with the whole on hover."""
    flat = " ".join((text or "").split())
    if not flat:
        return EMPTY
    if width(flat) <= chars:
        return flat
    cut, used = [], 1  # the ellipsis
    for c in flat:
        used += width(c)
        if used > chars:
            break
        cut.append(c)
    return hint("".join(cut).rstrip() + "…", flat)


def tail(text: str | None, chars: int):
    """The end of a long path or name (the part that tells them apart), with the whole on hover."""
    if not text:
        return EMPTY
    if len(text) <= chars:
        return text
    return hint("…" + text[-(chars - 1) :], text)


def badge(text: str, tone: str = "grey"):
    """A short coloured pill; `tone` is one of BADGE_TONES (an unknown tone shows grey)."""
    return format_html('<span class="ace-badge ace-badge-{}">{}</span>', tone if tone in BADGE_TONES else "grey", text)


def pretty_json(value):
    if value in (None, "", {}, []):
        return EMPTY
    return format_html('<pre class="ace-pre">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False))


def pre(text: str):
    if not text:
        return EMPTY
    return format_html('<pre class="ace-pre-wrap">{}</pre>', text)


def change_url(obj) -> str:
    return reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])


def change_link(obj, text=None):
    if obj is None:
        return EMPTY
    return format_html('<a href="{}">{}</a>', change_url(obj), text if text is not None else str(obj))


def changelist_url(model, **params) -> str:
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return f"{url}?{urlencode(params)}" if params else url


def counter_display(field: str, description: str):
    """A list/readonly column showing an integer counter column with thousands separators."""

    @admin.display(description=description, ordering=field)
    def display(self, obj):
        return number(getattr(obj, field))

    display.__name__ = f"{field}_display"
    return display


def text_column(field: str, chars: int, description: str | None = None, *, from_end: bool = False, ordering=None):
    """A list column of a text field (or a related object's name) cut to the width of `chars` Latin characters,
    the whole on hover: the start of a name, or the end of a path (`from_end`), which tells paths apart. A list
    of long values then keeps its every column on a 1400-pixel screen."""

    @admin.display(description=description or field.replace("_", " "), ordering=ordering or field)
    def display(self, obj):
        value = getattr(obj, field)
        text = "" if value is None else str(value)
        return tail(text, chars) if from_end else truncated(text, chars)

    display.__name__ = f"{field}_column"
    return display


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value).strip())
    except ValueError:
        return None
