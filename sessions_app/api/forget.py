"""`POST /api/v1/users/{user_id}/forget/`: the right to be forgotten (docs/portability.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_kit.api.fields import RejectUnknownFieldsMixin, StrictCharField
from platform_kit.api.views import TenantScopedMixin
from sessions_app.models import ForgetAudit
from sessions_app.services.forget import user_forget


class ForgetRequestSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    confirm = StrictCharField(max_length=255, help_text="The user id again: nothing is deleted unless it matches")
    dry_run = serializers.BooleanField(required=False, default=False, help_text="Count what would go; delete nothing")


class ForgottenSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    dry_run = serializers.BooleanField()
    deleted = serializers.DictField(child=serializers.IntegerField(), help_text="Rows (to be) deleted per table")
    total = serializers.IntegerField()
    audit = serializers.UUIDField(allow_null=True, help_text="The ForgetAudit row (null for a dry run)")
    forgotten_at = serializers.DateTimeField(allow_null=True)


class UserForgetView(TenantScopedMixin, APIView):
    model = ForgetAudit

    @extend_schema(
        request=ForgetRequestSerializer,
        responses=ForgottenSerializer,
        summary="Forget a user: delete every row of theirs in your tenant (or, dry run, count them)",
        description="Sessions, conversations, messages, requests, turns, state, telemetry (also metric points naming "
        "the user), usage roll-ups, records with their revisions and vectors, strategy runs, webhook deliveries "
        "about them, budgets scoped to them (their usage leaves the others), and the stored copies of their "
        "uploaded log files: a later upload at an offset is refused (send from offset 0). One transaction. "
        '`{"confirm": "<user_id>"}` is required; an audit row keeps the counts and the time, not the user id. '
        "What it cannot reach (database WAL and backups, access logs): docs/security.md.",
    )
    def post(self, request, user_id: str):
        body = ForgetRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["confirm"] != user_id:
            raise serializers.ValidationError({"confirm": ["Must be the user id of the URL, to confirm."]})
        if len(user_id) > 255:
            raise serializers.ValidationError({"user_id": ["At most 255 characters."]})
        forgotten = user_forget(
            tenant=self.tenant, user_id=user_id, actor="api", dry_run=body.validated_data["dry_run"]
        )
        audit = forgotten.audit
        return Response(
            ForgottenSerializer(
                {
                    "user_id": user_id,
                    "dry_run": forgotten.dry_run,
                    "deleted": forgotten.deleted,
                    "total": forgotten.total,
                    "audit": audit.pk if audit else None,
                    "forgotten_at": audit.forgotten_at if audit else None,
                }
            ).data
        )
