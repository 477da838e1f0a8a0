"""Cursor pagination for every list of the API: stable under inserts, and strict about its parameters."""

import base64
import functools
from urllib import parse

from django.conf import settings
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination


class CursorPage(CursorPagination):
    """Cursor pagination with `?page_size=` (up to ACE_MAX_PAGE_SIZE); a bad cursor is a 400."""

    page_size = 100
    page_size_query_param = "page_size"
    ordering = "-created_at"

    @property
    def max_page_size(self):
        return settings.ACE_MAX_PAGE_SIZE

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= self.max_page_size:
            raise exceptions.ValidationError({"page_size": [f"Must be an integer from 1 to {self.max_page_size}."]})
        return size

    def decode_cursor(self, request):
        encoded = request.query_params.get(self.cursor_query_param)
        # DRF's decoder silently turns most garbage into "the first page"; a client with a corrupted
        # cursor would then re-read pages without noticing.
        if encoded is not None and not self._well_formed(encoded):
            raise exceptions.ValidationError({"cursor": [self.invalid_cursor_message]})
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError({"cursor": [self.invalid_cursor_message]}) from None

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = f"Results per page: 1 to {self.max_page_size} (default {self.page_size})."
                parameter["schema"].update(minimum=1, maximum=self.max_page_size, default=self.page_size)
            elif parameter["name"] == self.cursor_query_param:
                parameter["description"] = "The `next` or `previous` link of a page carries it; send it unchanged."
        return parameters

    invalid_cursor_message = "Invalid cursor: use the `next` or `previous` link of a previous page as it is."

    @staticmethod
    def _well_formed(encoded: str) -> bool:
        try:
            decoded = base64.b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
            tokens = parse.parse_qs(decoded, keep_blank_values=True, strict_parsing=True) if decoded else {}
        except (ValueError, UnicodeError):
            return False
        return bool(tokens) and set(tokens) <= {"o", "r", "p"}


@functools.cache
def cursor_page(*ordering: str) -> type[CursorPage]:
    """The CursorPage class ordered by `ordering` (one class per ordering, whichever view asks for it)."""
    name = "CursorPage_" + "_".join(field.replace("-", "desc_") for field in ordering)
    return type(name, (CursorPage,), {"ordering": ordering[0] if len(ordering) == 1 else ordering})
