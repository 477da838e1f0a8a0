"""The API's ModelSerializer: model timestamps are BoundedDateTimeField, bounded on input and written in full
ISO 8601 on output (fields.BoundedDateTimeField)."""

from django.db import models
from rest_framework import serializers

from platform_kit.api.fields import BoundedDateTimeField


class ModelSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping}
    serializer_field_mapping[models.DateTimeField] = BoundedDateTimeField
