"""Sample memories for the demo tenant, drawn from the sample sessions (see sessions_app/sample_data.py)."""

from memory_app.services import record_create
from sessions_app.models import Message, Tenant


def memory_sample_create(*, tenant: Tenant) -> int:
    """Records of xiaoming with their exact source messages, as the memory document's scenario has them."""
    stated = Message.objects.filter(tenant=tenant, content__startswith="预算5000元").first()
    plan = Message.objects.filter(tenant=tenant, content__startswith="Day 1: 西湖").first()
    if stated is None:
        return 0
    samples = [
        ("profile", "偏好人文历史和博物馆", {"interests": ["人文历史", "博物馆"]}, [stated.pk]),
        ("profile", "不喜欢拥挤的景点", {"avoid": ["拥挤景点"]}, [stated.pk]),
        (
            "task",
            "杭州三日游：预算 5000 元，行程草稿为西湖、浙江省博物馆、良渚古城遗址",
            {"stage": "draft"},
            [stated.pk, *([plan.pk] if plan else [])],
        ),
    ]
    for kind, content, fields, sources in samples:
        record_create(
            tenant=tenant,
            user_id="xiaoming",
            type=kind,
            content=content,
            fields=fields,
            confidence=0.9,
            strategy="sample-data",
            strategy_version=1,
            source_message_ids=sources,
            actor="ace_bootstrap",
        )
    return len(samples)
