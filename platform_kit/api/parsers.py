"""The JSON request parser: DRF's, with two ways a body could still reach a 500 refused as a 400.

- JSON nested so deep that Python's parser dies of recursion (about 1,000 levels). Shallower nesting that
  a JSON column cannot take is refused by the fields (`fields.stored_json_error`).
- Text that is not Unicode: a lone UTF-16 surrogate (`"\\ud800"`, half of an emoji cut in two) parses into a
  Python string that no UTF-8 column, text or jsonb, can store. Only a `\\uD800`-`\\uDFFF` escape can carry
  one, so the walk over the parsed body runs only when the bytes hold such an escape: an ordinary body,
  however big, costs one scan of its bytes.
"""

from __future__ import annotations

import io
import re

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if _SURROGATE_ESCAPE.search(raw) and has_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - a string holds a lone UTF-16 surrogate (\\ud800-\\udfff, half of a character): "
                "send valid Unicode."
            )
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
