"""Reading a memory export: every line checked before anything is written, each problem named by line and field."""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from memory_app.models import TYPE_ERROR, RecordRevision, RecordType
from memory_app.selectors.export import FORMAT, VERSION
from platform_kit.api.fields import (
    BoundedDateTimeField,
    JSONObjectField,
    StrictCharField,
    StrictIntegerField,
    StrictNumberField,
)

MAX_REVISIONS = 10_000
MAX_SOURCES = 10_000


class SourceSessionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tool = StrictCharField(max_length=64, required=False, allow_blank=True, default="")
    agent_session_id = StrictCharField(max_length=255, required=False, allow_blank=True, default="")


class SourceMessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    session = serializers.UUIDField(required=False, allow_null=True)
    seq = StrictIntegerField(required=False, allow_null=True, min_value=0)
    external_id = StrictCharField(max_length=255, required=False, allow_blank=True, allow_null=True, default=None)


class SourcesSerializer(serializers.Serializer):
    sessions = SourceSessionSerializer(many=True, required=False, default=list, max_length=MAX_SOURCES)
    messages = SourceMessageSerializer(many=True, required=False, default=list, max_length=MAX_SOURCES)


class RevisionLineSerializer(serializers.Serializer):
    revision = StrictIntegerField(min_value=1, max_value=2**31 - 1)
    change = serializers.ChoiceField(choices=RecordRevision.Change.choices)
    actor = StrictCharField(max_length=255, allow_blank=True)
    reason = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    type = serializers.ChoiceField(choices=RecordType.choices, error_messages={"invalid_choice": TYPE_ERROR})
    content = StrictCharField(trim_whitespace=False, allow_blank=True)
    fields = JSONObjectField(required=False, default=dict)
    confidence = StrictNumberField(min_value=0, max_value=1)
    valid = serializers.BooleanField()
    valid_from = BoundedDateTimeField(required=False, allow_null=True)
    valid_until = BoundedDateTimeField(required=False, allow_null=True)
    source_session_ids = serializers.ListField(child=StrictCharField(max_length=64), required=False, default=list)
    source_message_ids = serializers.ListField(child=StrictCharField(max_length=64), required=False, default=list)
    created_at = BoundedDateTimeField()


class RecordLineSerializer(serializers.Serializer):
    """One record line of an export (`memory_app.selectors.export.record_lines`)."""

    kind = serializers.ChoiceField(choices=["record"])
    id = serializers.UUIDField()
    user_id = StrictCharField(max_length=255)
    namespace = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    type = serializers.ChoiceField(choices=RecordType.choices, error_messages={"invalid_choice": TYPE_ERROR})
    content = StrictCharField(max_length=20_000, trim_whitespace=False)
    fields = JSONObjectField(required=False, default=dict)
    confidence = StrictNumberField(required=False, min_value=0, max_value=1, default=1.0)
    valid = serializers.BooleanField(required=False, default=True)
    valid_from = BoundedDateTimeField(required=False, allow_null=True, default=None)
    valid_until = BoundedDateTimeField(required=False, allow_null=True, default=None)
    strategy = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    strategy_version = StrictIntegerField(required=False, allow_null=True, min_value=1, max_value=2**31 - 1)
    revision = StrictIntegerField(required=False, min_value=1, max_value=2**31 - 1)
    created_at = BoundedDateTimeField(required=False)
    updated_at = BoundedDateTimeField(required=False)
    invalidated_at = BoundedDateTimeField(required=False, allow_null=True, default=None)
    invalidated_reason = StrictCharField(max_length=255, required=False, allow_blank=True, default="")
    sources = SourcesSerializer(required=False)
    revisions = RevisionLineSerializer(many=True, required=False, default=list, max_length=MAX_REVISIONS)

    def validate(self, attrs):
        if attrs.get("valid_from") and attrs.get("valid_until") and attrs["valid_from"] >= attrs["valid_until"]:
            raise serializers.ValidationError({"valid_until": ["Must be after valid_from."]})
        numbers = [revision["revision"] for revision in attrs["revisions"]]
        if len(set(numbers)) != len(numbers):
            raise serializers.ValidationError({"revisions": ["Two revisions have the same number."]})
        attrs.setdefault("sources", {"sessions": [], "messages": []})
        return attrs


def parse_export(lines: Iterable[bytes | str], *, user_id_map: dict[str, str] | None = None) -> tuple[dict, list]:
    """(header, records) of an export, every line validated, users renamed by `user_id_map`. Blank lines are
    skipped. Raises DRF's ValidationError({"line N": {field: [...]}}) at the first bad line: nothing is written."""
    header, records, seen = None, [], {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise ValidationError({f"line {number}": [f"Not JSON: {error}."]}) from None
        if not isinstance(value, dict):
            raise ValidationError({f"line {number}": ["Each line must be a JSON object."]})
        if header is None:
            header = _header(value, number)
            continue
        line = RecordLineSerializer(data=value)
        if not line.is_valid():
            raise ValidationError({f"line {number}": _plain(line.errors)})
        record = line.validated_data
        if record["id"] in seen:
            raise ValidationError({f"line {number}": {"id": [f"Already on line {seen[record['id']]}."]}})
        seen[record["id"]] = number
        record["user_id"] = (user_id_map or {}).get(record["user_id"], record["user_id"])
        records.append(record)
    if header is None:
        raise ValidationError({"line 1": ["The export is empty: expected a header line and record lines."]})
    return header, records


def _header(value: dict, number: int) -> dict:
    if value.get("format") != FORMAT or value.get("kind") != "header":
        raise ValidationError(
            {f"line {number}": {"format": [f'The first line must be the header of a "{FORMAT}" export.']}}
        )
    if value.get("version") != VERSION:
        wrong = value.get("version")
        raise ValidationError(
            {f"line {number}": {"version": [f"Version {wrong!r} is not one this server reads: {VERSION}."]}}
        )
    return value


def _plain(errors):
    """DRF's ErrorDetail tree as plain lists and dicts of strings."""
    if isinstance(errors, dict):
        return {key: _plain(value) for key, value in errors.items()}
    if isinstance(errors, list):
        return [_plain(value) for value in errors]
    return str(errors)


def user_id_map(pairs: list[str]) -> dict[str, str]:
    """`["old=new", ...]` as {old: new}; a pair without "=" or with an empty side is a 400."""
    mapping = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new or len(new) > 255:
            raise serializers.ValidationError({"map_user": [f"{pair!r}: write old=new (two user ids)."]})
        mapping[old] = new
    return mapping
