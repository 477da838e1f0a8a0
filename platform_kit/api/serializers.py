"""The API's ModelSerializer: model timestamps are BoundedDateTimeField, bounded on input and written in full
ISO 8601 on output (fields.BoundedDateTimeField)."""

from django.db import models
from rest_framework import serializers

from platform_kit.api.fields import BoundedDateTimeField


class ModelSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping}
    serializer_field_mapping[models.DateTimeField] = BoundedDateTimeField


# -- one instance per serializer class, for the calls made many times a second --------------------------------
# Making a serializer builds its fields (a ModelSerializer reads its model's fields every time), which on a chat
# turn's small bodies costs more than validating and writing them. A serializer whose validation and output
# depend on nothing but the data (no context, no instance, no state kept between calls: every one used here)
# can serve every request of the process from one instance, as Django's own form fields do.
_SHARED: dict[type, serializers.BaseSerializer] = {}


def shared(serializer_class):
    """The process's one instance of `serializer_class`, its fields built (e.g. the child of a list serializer)."""
    serializer = _SHARED.get(serializer_class)
    if serializer is None:
        serializer = _SHARED[serializer_class] = serializer_class()
        serializer.fields  # noqa: B018 - built (and bound) now, once
    return serializer


def validated(serializer_class, data) -> dict:
    """The validated data of `serializer_class(data=data)`, or the ValidationError `is_valid()` would raise."""
    return shared(serializer_class).run_validation(data)


def represented(serializer_class, instance) -> dict:
    """`serializer_class(instance).data`."""
    return shared(serializer_class).to_representation(instance)
