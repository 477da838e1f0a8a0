"""Memory export and import in the admin: the same lines and the same import as the API, for a tenant the staff
user picks."""

import orjson
from django.core.files.uploadedfile import SimpleUploadedFile

from memory_app.models import Record
from portability_app.models import RecordImport
from tests.support.api import make_client


def _remember(client, user_id, content):
    answer = client.post("/api/v1/records/", {"user_id": user_id, "type": "fact", "content": content}, format="json")
    assert answer.status_code == 201, answer.content


def test_staff_export_a_tenants_memory_and_import_it_into_another(admin_client):
    acme, globex = make_client("acme"), make_client("globex")
    _remember(acme, "xiaoming", "Prefers window seats")
    _remember(acme, "xiaohong", "Allergic to peanuts")

    page = admin_client.get("/admin/portability_app/recordimport/export/")
    assert page.status_code == 200 and b"Download the export" in page.content
    assert b"Export / import memory" in admin_client.get("/admin/memory_app/record/").content

    export = admin_client.get(
        "/admin/portability_app/recordimport/export/", {"tenant": acme.tenant.pk, "user_id": "xiaoming"}
    )
    assert export.status_code == 200 and export["Content-Type"] == "application/x-ndjson"
    body = b"".join(export.streaming_content)
    lines = [orjson.loads(line) for line in body.splitlines()]
    assert lines[0]["format"] == "open-ace.memory" and [line["content"] for line in lines[1:]] == [
        "Prefers window seats"
    ]
    api_export = b"".join(acme.get("/api/v1/records/export/", {"user_id": "xiaoming"}).streaming_content)
    assert body.splitlines()[1:] == api_export.splitlines()[1:]  # the same record lines as the API's

    upload = SimpleUploadedFile("memory.jsonl", body, content_type="application/x-ndjson")
    answer = admin_client.post(
        "/admin/portability_app/recordimport/import/",
        {"tenant": globex.tenant.pk, "file": upload, "map_user": "xiaoming=xm"},
    )
    assert answer.status_code == 302
    imported = Record.objects.get(tenant=globex.tenant)
    assert (imported.user_id, imported.content) == ("xm", "Prefers window seats")
    assert imported.revision == lines[1]["revision"]
    # The imported record's ledger row, in the list of record imports (read-only) and on its own page.
    listing = admin_client.get("/admin/portability_app/recordimport/")
    assert listing.status_code == 200 and b"acme" in listing.content
    row = RecordImport.objects.get(record=imported)
    assert row.origin_tenant == "acme" and row.actor == "admin:admin"
    assert admin_client.get(f"/admin/portability_app/recordimport/{row.pk}/change/").status_code == 200

    # The same file again writes nothing; a broken one says which line, and writes nothing either.
    upload = SimpleUploadedFile("memory.jsonl", body, content_type="application/x-ndjson")
    again = {"tenant": globex.tenant.pk, "file": upload, "map_user": "xiaoming=xm"}
    assert admin_client.post("/admin/portability_app/recordimport/import/", again).status_code == 302
    assert Record.objects.filter(tenant=globex.tenant).count() == 1
    broken = SimpleUploadedFile("memory.jsonl", body + b'{"not": "a record"}\n')
    refused = admin_client.post(
        "/admin/portability_app/recordimport/import/", {"tenant": globex.tenant.pk, "file": broken}
    )
    assert refused.status_code == 200 and b"line 3" in refused.content
    assert Record.objects.filter(tenant=globex.tenant).count() == 1
