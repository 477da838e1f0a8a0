"""The JSON request parser: DRF's, with two ways a body could still reach a 500 refused as a 400.

- JSON nested so deep that Python's parser dies of recursion (about 1,000 levels). Shallower nesting that
  a JSON column cannot take is refused by the fields (`fields.stored_json_error`).
- Text that is not Unicode: a lone UTF-16 surrogate (`"\\ud800"`, half of an emoji cut in two) parses into a
  Python string that no UTF-8 column, text or jsonb, can store. Only a `\\uD800`-`\\uDFFF` escape can carry
  one, so the walk over the parsed body runs only when the bytes hold such an escape: an ordinary body,
  however big, costs one scan of its bytes.
- NaN, Infinity and -Infinity (constants Python's parser reads, and numbers too large for a double, 1e999):
  refused with a 400 that names where they are (`{"errors": {"0.confidence": [...]}}`), as a field would.
  PostgreSQL's jsonb cannot hold them, NaN passes every range check, and a stored one cannot be written as
  JSON again: every later read would be a 500. The parser's hooks run only when the bytes could hold one.
"""

from __future__ import annotations

import codecs
import io
import json
import re

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from platform_kit.api.fields import NON_FINITE_REFUSED, non_finite_path

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")
# What a non-finite number can be written as: the constants, an exponent of three digits or more (a double
# ends at 1.8e308), or 300-odd digits in a row. Rarely in an ordinary body (a UUID's "3e45" can be one).
_MAYBE_NOT_FINITE = re.compile(rb"NaN|Infinity|[0-9][eE]\+?[0-9]{3}|[0-9]{300}")


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            if _MAYBE_NOT_FINITE.search(raw):
                data = self._parse_marking_non_finite(raw, parser_context)
            else:
                data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if _SURROGATE_ESCAPE.search(raw) and has_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - a string holds a lone UTF-16 surrogate (\\ud800-\\udfff, half of a character): "
                "send valid Unicode."
            )
        return data

    def _parse_marking_non_finite(self, raw: bytes, parser_context):
        """DRF's parse, with NaN and ±Infinity read as floats (DRF's strict parse refuses the constants without
        saying where, and reads 1e999 as Infinity); a 400 naming where the first one is."""
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json.loads(codecs.getreader(encoding)(io.BytesIO(raw)).read())
        except ValueError as error:
            raise ParseError(f"JSON parse error - {error}") from None
        path = non_finite_path(data)
        if path is not None:
            raise ValidationError({path or "non_field_errors": [NON_FINITE_REFUSED]})
        return data


def has_lone_surrogate(value) -> bool:
    """Whether a parsed JSON value holds a lone UTF-16 surrogate in a string or a key, without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _is_not_unicode(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _is_not_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
