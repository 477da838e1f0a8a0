import base64
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

    invalid_cursor_message = "Invalid cursor: use the `next` or `previous` link of a previous page as it is."

    @staticmethod
    def _well_formed(encoded: str) -> bool:
        try:
            decoded = base64.b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
            tokens = parse.parse_qs(decoded, keep_blank_values=True, strict_parsing=True) if decoded else {}
        except (ValueError, UnicodeError):
            return False
        return bool(tokens) and set(tokens) <= {"o", "r", "p"}


class SeqCursorPage(CursorPage):
    ordering = "seq"


class NewestMessagesCursorPage(CursorPage):
    # Messages of one batch share created_at: seq keeps them in their order.
    ordering = ("-created_at", "-seq")


class NewestInSessionCursorPage(CursorPage):
    # Within one session seq is the order of arrival, and its index reads a page of even a session
    # that is old and huge at once (walking created_at would first skip every newer message).
    ordering = "-seq"


class StartedCursorPage(CursorPage):
    ordering = "-started_at"
