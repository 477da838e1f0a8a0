"""The JSON request parser: DRF's, with the two ways a body could still reach a 500 refused as a 400.

- JSON nested deeper than MAX_JSON_DEPTH: Python's parser dies of recursion at about 1,000 levels, and
  shallower documents still break the encoders after it (orjson stops at 255 levels). No field of the API
  needs more than a few levels.
- Text that is not Unicode: a lone UTF-16 surrogate (`"\\ud800"`, half of an emoji cut in two) parses into a
  Python string that no UTF-8 column, text or jsonb, can store.
"""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 64


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.") from None
        if json_depth(data) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels.")
        if has_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - a string holds a lone UTF-16 surrogate (\\ud800-\\udfff, half of a character): "
                "send valid Unicode."
            )
        return data


def json_depth(value) -> int:
    """How deeply a parsed JSON value nests (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item)
    return deepest


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
