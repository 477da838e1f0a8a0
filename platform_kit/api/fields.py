"""Strict serializer fields: a wrong type is refused with a 400 that says what to send, never coerced, and
JSON that PostgreSQL cannot store (NUL, NaN and Infinity) is refused before it reaches a write."""

import math
from datetime import UTC, datetime

import orjson
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField
from django_filters.filters import IsoDateTimeFilter
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator


class _ProhibitSurrogates(ProhibitSurrogateCharactersValidator):
    """DRF's check, with its message, that looks at the characters one by one in Python only when the text
    is not valid Unicode: the UTF-8 encoder finds that at C speed (a chat turn's texts are kilobytes, and
    DRF's own loop was an eighth of the API's CPU time)."""

    def __call__(self, value):
        try:
            str(value).encode("utf-8")
        except UnicodeEncodeError:
            super().__call__(value)


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [
            _ProhibitSurrogates() if type(validator) is ProhibitSurrogateCharactersValidator else validator
            for validator in self.validators
        ]

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be an integer (a JSON number, not a string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


NON_FINITE_REFUSED = (
    "Must be a finite number: NaN, Infinity, -Infinity and numbers beyond ±1.8e308 are not numbers that can be stored."
)


class FiniteNumberField(serializers.FloatField):
    """A float that is a number: NaN and ±Infinity (which `float()` reads from "nan" or "inf", MCP's JSON from
    `NaN`, and any JSON parser from 1e999) are refused. NaN passes every range check (no comparison with it is
    true), and once stored it cannot be written as JSON again: every read of it would be a 500."""

    default_error_messages = {"not_finite": NON_FINITE_REFUSED}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("not_finite")
        return value


class StrictNumberField(FiniteNumberField):
    default_error_messages = {"invalid": "Must be a number (a JSON number, not a string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


def non_finite_path(value) -> str | None:
    """Where a JSON value holds NaN or ±Infinity ("a.0.b", "" for the value itself), or None. Without
    recursion; strings are leaves, so a body of long texts costs a few steps."""
    stack = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return path
        elif isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), child) for key, child in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}.{index}" if path else str(index), child) for index, child in enumerate(item))
    return None


def contains_nul(value) -> bool:
    """Whether a JSON value holds NUL in a string or a key (jsonb cannot store it)."""
    try:
        if b"\\u0000" not in orjson.dumps(value):  # the quick answer, nearly always
            return False
    except TypeError:
        pass
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(key) or contains_nul(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(contains_nul(item) for item in value)
    return False


NUL_REFUSED = "Null characters (\\u0000) are not allowed: PostgreSQL cannot store them in JSON."
NON_FINITE_JSON_REFUSED = (
    "NaN and Infinity are not JSON numbers and cannot be stored (PostgreSQL's jsonb has no such numbers): send a "
    "number, a string or null"
)
MAX_JSON_DEPTH = 250  # orjson, which writes the JSON columns, stops at 254 levels; no field needs a tenth of it
NESTED_REFUSED = f"Nested more than {MAX_JSON_DEPTH} levels deep: JSON this deep cannot be stored."


def stored_json_error(value) -> str | None:
    """Why a JSON value cannot go into a jsonb column (NUL, NaN or Infinity, or nesting the encoder refuses), or
    None. One encoding of the value and one walk over its containers in the usual case (orjson writes NaN as
    null, silently, and Django's encoder writes it as `NaN`, which PostgreSQL refuses: a 500)."""
    try:
        encoded = orjson.dumps(value)
    except TypeError as error:
        if "Recursion" in str(error):
            return NESTED_REFUSED
        return NUL_REFUSED if contains_nul(value) else None
    if b"\\u0000" in encoded and contains_nul(value):
        return NUL_REFUSED
    path = non_finite_path(value) if b"null" in encoded else None
    if path is not None:
        return f"{NON_FINITE_JSON_REFUSED} (at {path})." if path else f"{NON_FINITE_JSON_REFUSED}."
    return None


class StoredJSONField(serializers.JSONField):
    """JSON for a jsonb column, which cannot hold NUL (nor nesting deeper than its encoder takes): refused
    with a 400, as DRF refuses NUL in text."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        error = stored_json_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(StoredJSONField):
    default_error_messages = {"not_object": "Must be a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("not_object")
        return super().to_internal_value(data)


class RejectUnknownFieldsMixin:
    """A misspelt field would otherwise be dropped silently: the client would lose data it sent."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [f"Unknown field. Allowed: {', '.join(sorted(self.fields))}."] for name in unknown}
                )
        return super().to_internal_value(data)


EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)  # a year of room: windows and roll-ups add days and hours to a time
OUT_OF_RANGE = "Must be a time from 1000-01-01 to 9998-12-31 (UTC)."


def bounded_utc(value: datetime) -> datetime | None:
    """`value` in UTC when it is within the range the API takes, else None. Offsets are normalised here:
    PostgreSQL refuses offsets beyond ±15:59 that ISO 8601 (and Python) accept, and UTC is the same instant."""
    try:
        moment = value.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return moment if EARLIEST <= moment < LATEST else None


class BoundedDateTimeField(serializers.DateTimeField):
    """A timestamp the database and the API's date arithmetic can hold: in UTC, years 1000 to 9998. Written as
    ISO 8601 in UTC with microseconds (`2026-01-02T03:04:05.000000Z`), the year always in four digits: strftime's
    `%Y` writes the year 92 as `92`, and rows imported before the bound may hold such a year."""

    default_error_messages = {"out_of_range": OUT_OF_RANGE}

    def to_internal_value(self, value):
        moment = bounded_utc(super().to_internal_value(value))
        if moment is None:
            self.fail("out_of_range")
        return moment

    def to_representation(self, value):
        if not value or isinstance(value, str):
            return value or None
        try:
            moment = self.enforce_timezone(value).astimezone(UTC)
        except (OverflowError, ValueError):  # within hours of year 1 or 9999: the instant as stored
            moment = value
        return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class BoundedIsoDateTimeFormField(IsoDateTimeField):
    """The query-parameter form of BoundedDateTimeField (django-filter's ISO field, bounded and in UTC)."""

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return None
        moment = bounded_utc(parsed)
        if moment is None:
            raise ValidationError(OUT_OF_RANGE, code="out_of_range")
        return moment


class BoundedIsoDateTimeFilter(IsoDateTimeFilter):
    field_class = BoundedIsoDateTimeFormField
