"""Records in the admin: what each user's memory holds, where each memory came from, how it changed."""

from django.contrib import admin
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from memory_app.models import Record, RecordRevision
from memory_app.selectors.records import nearest_records
from memory_app.selectors.status import embedder_status, memory_status
from memory_app.services import RecordClosed, record_invalidate
from platform_kit.admin.display import EMPTY, badge, counted, parse_uuid, pretty_json, truncated
from platform_kit.admin.mixins import BigTableAdminMixin, ReadOnlyAdminMixin
from sessions_app.links import timeline_url
from sessions_app.models import Tenant
from sessions_app.search import keyword_filter


class RecordRevisionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RecordRevision
    fields = ("revision", "change", "actor", "reason", "content", "confidence", "valid", "created_at")
    readonly_fields = fields
    ordering = ("-revision",)
    extra = 0
    can_delete = False


@admin.register(Record)
class RecordAdmin(ReadOnlyAdminMixin, BigTableAdminMixin, admin.ModelAdmin):
    list_display = ("content_preview", "user_id", "type", "validity", "confidence", "strategy_display", "updated_at")
    list_filter = ("type", "valid", "strategy", "tenant")
    search_fields = ("content",)  # shows the search box; get_search_results does the real work
    search_help_text = "Full-text search in the content (English words, Chinese text), or an exact user_id or id."
    ordering = ("-updated_at",)
    list_select_related = ("tenant",)
    list_defer = ("search_vector",)
    readonly_fields = (
        "id",
        "similar_link",
        "tenant",
        "user_id",
        "namespace",
        "type",
        "content",
        "fields_display",
        "confidence",
        "validity",
        "valid_from",
        "valid_until",
        "strategy",
        "strategy_version",
        "provenance",
        "revision",
        "created_at",
        "updated_at",
        "invalidated_at",
        "invalidated_reason",
        "expires_at",
    )
    fields = readonly_fields
    inlines = (RecordRevisionInline,)
    actions = ("invalidate_records", "reembed_records")

    def get_urls(self):
        similar = path(
            "<uuid:object_id>/similar/", self.admin_site.admin_view(self.similar_view), name="memory_app_record_similar"
        )
        status = path("status/", self.admin_site.admin_view(self.status_view), name="memory_app_memory_status")
        return [similar, status, *super().get_urls()]

    def status_view(self, request):
        """The memory backlog per tenant (GET /api/v1/memory/status/ for each), or of one user of one tenant."""
        if not self.has_view_permission(request):
            raise Http404
        tenants = Tenant.objects.order_by("name")
        tenant_id, user_id = parse_uuid(request.GET.get("tenant", "")), request.GET.get("user_id", "").strip()
        if tenant_id is not None:
            tenants = tenants.filter(pk=tenant_id)
        rows = [(tenant, memory_status(tenant=tenant, user_id=user_id or None)) for tenant in tenants[:200]]
        context = {
            **self.admin_site.each_context(request),
            "title": "Memory status",
            "rows": rows,
            "embedder": rows[0][1].embedder if rows else embedder_status()[1],
            "user_id": user_id,
            "tenant_id": tenant_id,
            "tenants": Tenant.objects.order_by("name")[:200],
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/memory_app/status.html", context)

    def similar_view(self, request, object_id):
        """The records nearest to this one in the embedder's space: duplicates to merge, contradictions to
        invalidate."""
        record = Record.objects.filter(pk=object_id).first()
        if record is None or not self.has_view_permission(request, record):
            raise Http404
        all_users = request.GET.get("all_users") == "1"
        rows, problem = [], ""
        if record.embedding_key:
            rows = nearest_records(record=record, limit=20, same_user=not all_users)
        else:
            problem = "This record has no vector yet (the embedder was unavailable, or it is queued)."
        context = {
            **self.admin_site.each_context(request),
            "title": "Similar records",
            "record": record,
            "rows": rows,
            "problem": problem,
            "all_users": all_users,
            "embedder_key": record.embedding_key,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/memory_app/similar.html", context)

    @admin.display(description="similar")
    def similar_link(self, record):
        return format_html(
            '<a href="{}">find similar</a>', reverse("admin:memory_app_record_similar", args=[record.pk])
        )

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        found = keyword_filter(queryset, term) | queryset.filter(user_id=term)
        pk = parse_uuid(term)
        if pk is not None:
            found = found | queryset.filter(pk=pk)
        return found, False

    @admin.display(description="content")
    def content_preview(self, record):
        return truncated(record.content, 56)

    @admin.display(description="valid", ordering="valid")
    def validity(self, record):
        if record.valid:
            return badge("valid", "green")
        return badge(record.invalidated_reason or "invalid", "slate")

    @admin.display(description="strategy", ordering="strategy")
    def strategy_display(self, record):
        if not record.strategy:
            return EMPTY
        return f"{record.strategy} v{record.strategy_version}" if record.strategy_version else record.strategy

    @admin.display(description="fields")
    def fields_display(self, record):
        return pretty_json(record.fields)

    @admin.display(description="provenance: source messages")
    def provenance(self, record):
        messages = record.source_messages.select_related("session").order_by("session_id", "seq")
        if not messages:
            return EMPTY
        return format_html(
            "<ul class='ace-list'>{}</ul>",
            format_html_join(
                "",
                "<li><a href='{}'>{} · #{} {}</a>: {}</li>",
                (
                    (
                        timeline_url(m.session_id, at_seq=m.seq),
                        Truncator(str(m.session)).chars(40),
                        m.seq,
                        m.role,
                        Truncator(m.content).chars(120),
                    )
                    for m in messages
                ),
            ),
        )

    @admin.action(description="Invalidate selected records (kept for audit)", permissions=["view"])
    def invalidate_records(self, request, queryset):
        done = 0
        for record in queryset.filter(valid=True).select_related("tenant"):
            try:
                record_invalidate(
                    tenant=record.tenant, record_id=record.pk, actor=f"admin:{request.user}", reason="invalidated"
                )
                done += 1
            except RecordClosed:
                continue
        self.message_user(
            request,
            f"Invalidated {counted(done, 'record')}; {'it is' if done == 1 else 'they are'} no longer recalled.",
        )

    @admin.action(description="Re-embed selected records with the configured embedder", permissions=["view"])
    def reembed_records(self, request, queryset):
        from memory_app.tasks import embed_records, enqueue

        ids = list(queryset.filter(valid=True).values_list("pk", flat=True))
        queryset.filter(pk__in=ids).update(embedding=None, embedding_key="")
        for start in range(0, len(ids), 256):
            enqueue(embed_records, ids[start : start + 256])
        self.message_user(request, f"Queued {counted(len(ids), 'record')} for embedding.")


# The admin index links to the memory status (after the usage dashboard's link, which sessions_app adds).
admin.site.index_template = "admin/memory_app/index.html"
