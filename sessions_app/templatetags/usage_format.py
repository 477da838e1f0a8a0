"""Number formats of the usage dashboard: a few thousand cells a page, so plain str.format rather than
Django's localizing floatformat (several times slower per cell)."""

from decimal import Decimal

from django import template

from platform_kit.admin.display import tail, truncated

register = template.Library()


@register.filter
def thousands(value) -> str:
    """1234567 → "1,234,567"."""
    return f"{int(value or 0):,}"


@register.filter
def usd(value, places: int = 4) -> str:
    """Decimal("1234.5678901") → "1,234.5679" (the CSV and the API keep six decimals)."""
    return f"{Decimal(value or 0):,.{int(places)}f}"


@register.filter
def cut(value, chars: int = 40):
    """A long name on one line, cut to the width of `chars` Latin characters (Chinese counts twice), the whole on
    hover."""
    return truncated(str(value or ""), int(chars))


@register.filter
def ending(value, chars: int = 40):
    """The end of a long path (the part that tells projects apart), the whole on hover."""
    return tail(str(value or ""), int(chars))
