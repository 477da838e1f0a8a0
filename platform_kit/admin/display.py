"""How the admin shows values (numbers, badges, JSON, text, links to other admin pages) and reads ids back."""

from __future__ import annotations

import json
import uuid

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

BADGE_TONES = ("green", "blue", "purple", "red", "amber", "grey", "slate")  # classes in platform_kit/admin.css
EMPTY = "-"  # as Django's own empty_value_display


def number(value) -> str:
    """Token and message counts with thousands separators: 1234567 → "1,234,567"."""
    return EMPTY if value is None else f"{value:,}"


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


def change_link(obj, text=None):
    if obj is None:
        return EMPTY
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, text if text is not None else str(obj))


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


def parse_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value).strip())
    except ValueError:
        return None
