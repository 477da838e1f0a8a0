"""`POST /api/v1/imports/`: upload agent-log files and import them; `GET /api/v1/imports/files/`: what the server
holds of each uploaded file (what `ace_push` resumes from).

Uploads are kept in the storage every host reads and imported from each host's copy under
`$ACE_DATA_DIR/uploads/<tenant id>/` (per machine when the upload names one; `pipeline.uploads`), so uploading a
file again after it grew, through any host, imports only its new lines (the importer keeps each file's offset). A part
can also be only the new bytes of the client's file, from an `offset` (see `services.imports.uploads`). A
request is checked whole before anything is stored: a bad field, a name that is not a log's, a path where the
server holds a file or folder in the way, an offset the server cannot continue from, a file past the reading
limits (`importers.limits`: a line too long, 400; a compressed log that decompresses to too much, 413), or a file
no parser recognises (when no file is left to import) is a 4xx that writes nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ingest_app.importers import registry
from ingest_app.importers.detect import is_log_name
from ingest_app.models import ImportedFile, ImportTool
from ingest_app.pipeline import import_files
from ingest_app.pipeline.paths import record_path
from ingest_app.pipeline.upload_copies import MACHINES_DIR, upload_cache_refresh, upload_root
from ingest_app.pipeline.uploads import (
    HEAD_BYTES,
    UploadPart,
    UploadRejected,
    content_sha256,
    head_sha256,
    stored_size,
    uploads_store,
)
from platform_kit.api.errors import error_response
from platform_kit.api.fields import BoundedDateTimeField
from platform_kit.api.pagination import CursorPage
from platform_kit.api.schema import ErrorSerializer
from sessions_app.schema import MACHINE_MAX_LENGTH
from sessions_app.validators import MACHINE_NAME

_UNSAFE = re.compile(r"[^\w.@+\-]")
MAX_FILES = 100
MAX_PATH_PARTS = 12


def clean_relative_path(name: str) -> str | None:
    """A safe relative path from a client's file name or path (`proj/sess/subagents/agent-1.jsonl`) that names a
    log file (`detect.is_log_name`: `.jsonl`, archived transcripts, a whole-document log where its tool keeps
    them), or None."""
    parts = [part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("", ".", "/")]
    if not parts or any(part == ".." for part in parts) or len(parts) > MAX_PATH_PARTS:
        return None
    cleaned = "/".join(_UNSAFE.sub("_", part)[:200] for part in parts)
    if not is_log_name(cleaned) or PurePosixPath(cleaned).name.startswith(".json"):
        return None
    return cleaned


def _folders(name: str) -> list[str]:
    """The folders a relative path lies in: `a/b/c.jsonl` → `a`, `a/b`."""
    parts = name.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]


class ImportUploadSerializer(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False),
        allow_empty=False,
        max_length=MAX_FILES,
        help_text="One or more agent-log files. Send the whole file each time (only new lines are read), or only "
        "its new bytes with `offsets`.",
    )
    paths = serializers.ListField(
        child=serializers.CharField(max_length=1000),
        required=False,
        help_text="Optional, one per file in the same order: where the file lives relative to the tool's home "
        "(e.g. `.claude/projects/-home-dev-app/<session>/subagents/agent-1.jsonl`), so sub-agent files and "
        "re-uploads are recognised. Default: the file's name.",
    )
    offsets = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=2**62),
        required=False,
        help_text="Optional, one per file in the same order: the byte offset in the client's file at which the "
        "uploaded part starts. The server appends the part to what it holds of that path; bytes it already holds "
        "(a retry) are compared and skipped. An offset beyond what it holds is a 400 that names where to resume; "
        "bytes that differ from what it holds are a 409 (send the file whole, without offsets). Without "
        "`offsets`, each file is the whole file and replaces the server's copy.",
    )
    machine = serializers.CharField(
        max_length=MACHINE_MAX_LENGTH,
        required=False,
        allow_blank=True,
        validators=[MACHINE_NAME],
        help_text="The machine the files come from (e.g. its host name): its files are kept apart from other "
        "machines' and new sessions get it as their `machine`. Default: none.",
    )
    tool = serializers.ChoiceField(choices=ImportTool.choices, default=ImportTool.AUTO)
    user_id = serializers.CharField(
        max_length=255,
        required=False,
        allow_blank=True,
        help_text="Attribute new sessions to this user (default: the user the log names, or its home directory).",
    )

    def validate(self, data):
        files, paths = data["files"], data.get("paths")
        if paths is not None and len(paths) != len(files):
            raise serializers.ValidationError({"paths": [f"Give one path per file ({len(files)}), or none."]})
        offsets = data.get("offsets")
        if offsets is not None and len(offsets) != len(files):
            raise serializers.ValidationError({"offsets": [f"Give one offset per file ({len(files)}), or none."]})
        names, errors = [], {}
        for index, upload in enumerate(files):
            wanted = paths[index] if paths is not None else upload.name or ""
            name = clean_relative_path(wanted)
            if name is None and registry.upload_refusal(wanted):
                errors[f"files.{index}"] = [registry.upload_refusal(wanted)]
            elif name is None:
                errors[f"files.{index}"] = [
                    f"{wanted!r}: a relative path (up to {MAX_PATH_PARTS} parts) of an agent-log file is expected "
                    "(.jsonl, an archived transcript, or a whole-document .json log in its tool's folder)."
                ]
            elif name in names:
                errors[f"files.{index}"] = [f"{name!r} is uploaded twice in this request."]
            names.append(name)
        folders = {folder: index for index, name in enumerate(names) if name for folder in _folders(name)}
        for index, name in enumerate(names):
            if name in folders and f"files.{index}" not in errors:
                errors[f"files.{index}"] = [
                    f"{name!r} is a file here and a folder of {names[folders[name]]!r} in this request; upload one "
                    "of them under another path."
                ]
        if errors:
            raise serializers.ValidationError(errors)
        data["names"] = names
        return data


class ImportIssueSerializer(serializers.Serializer):
    path = serializers.CharField()
    line = serializers.IntegerField(help_text="1-based; 0 is the file as a whole")
    level = serializers.ChoiceField(choices=["error", "warning"])
    message = serializers.CharField()


class ImportedFileResultSerializer(serializers.Serializer):
    path = serializers.CharField()
    status = serializers.ChoiceField(choices=["imported", "unchanged", "refused", "skipped"])
    tool = serializers.CharField()
    session = serializers.UUIDField(allow_null=True)
    messages = serializers.IntegerField(help_text="Messages imported from this file by this request")
    lines_read = serializers.IntegerField()
    reason = serializers.CharField(help_text="Why the file was refused")
    streaming = serializers.IntegerField(
        help_text="Responses stored whose last lines have not arrived yet (completed in place when they do)"
    )
    renamed_from = serializers.CharField(
        help_text="The path this file was imported under before it was renamed (an OpenClaw archive), or empty"
    )
    stored_bytes = serializers.IntegerField(
        help_text="How many bytes of the file the server now holds: where the next part starts (`offsets`)"
    )


class ImportSummarySerializer(serializers.Serializer):
    summary = serializers.CharField(help_text="One line, as `manage.py ace_import` prints it")
    files_seen = serializers.IntegerField()
    files_imported = serializers.IntegerField()
    files_unchanged = serializers.IntegerField()
    files_refused = serializers.IntegerField()
    files_skipped = serializers.IntegerField(
        help_text="Files found but not read (not a regular file, a link out of the folder): never for an upload"
    )
    files_renamed = serializers.IntegerField(
        help_text="Files recognised as renamed ones already imported (read on from their offset)"
    )
    sessions_created = serializers.IntegerField()
    messages = serializers.IntegerField(help_text="New messages")
    requests = serializers.IntegerField(help_text="New LLM requests")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_creation_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    lines_read = serializers.IntegerField()
    streaming = serializers.IntegerField(
        help_text="Responses stored whose last lines have not arrived yet (completed in place when they do)"
    )
    issues_total = serializers.IntegerField()
    issues = ImportIssueSerializer(many=True, help_text="Corrupt lines and other problems (the first 200)")
    files = ImportedFileResultSerializer(many=True)


class ImportUploadView(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        summary="Upload agent logs (Claude Code, Qwen Code, OpenClaw, …) and import them",
        description="multipart/form-data with one or more `files`. Re-uploading a file that grew imports only "
        "its new lines; re-uploading the same bytes imports nothing. With `offsets`, each part is only the "
        "client file's bytes from that offset on (what `ace_push` sends: `GET /api/v1/imports/files/` says "
        "where the server's copy ends); with `machine`, the files are kept and their sessions labelled per "
        "machine. A file no parser recognises is refused with the reason (400 when no file is left to import).",
        request={"multipart/form-data": ImportUploadSerializer},
        responses={
            201: ImportSummarySerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="A field to fix, an offset beyond what the server holds, a path where the server holds "
                "a file or folder in the way, a line longer than ACE_IMPORT_MAX_LINE_BYTES",
            ),
            409: OpenApiResponse(
                ErrorSerializer, description="The bytes before the end of a part differ from the server's copy"
            ),
            413: OpenApiResponse(
                ErrorSerializer,
                description="The files are larger than ACE_MAX_UPLOAD_BYTES, or a compressed log decompresses to "
                "more than ACE_IMPORT_MAX_DECOMPRESSED_BYTES or ACE_IMPORT_MAX_COMPRESSION_RATIO times its size",
            ),
        },
        examples=[
            OpenApiExample(
                "Summary",
                response_only=True,
                status_codes=["201"],
                value={
                    "summary": "imported 1 files (0 unchanged, 0 refused): 1 new sessions, 19 messages, "
                    "6 requests, 752 tokens, 3 issues",
                    "files_seen": 1,
                    "files_imported": 1,
                    "files_unchanged": 0,
                    "files_refused": 0,
                    "files_skipped": 0,
                    "sessions_created": 1,
                    "messages": 19,
                    "requests": 6,
                    "input_tokens": 610,
                    "output_tokens": 142,
                    "cache_read_tokens": 26400,
                    "cache_creation_tokens": 200,
                    "total_tokens": 752,
                    "lines_read": 26,
                    "issues_total": 1,
                    "issues": [
                        {
                            "path": "5f0c2a9e.jsonl",
                            "line": 14,
                            "level": "error",
                            "message": "not valid JSON (Expecting property name enclosed in double quotes at "
                            "column 52); line skipped",
                        }
                    ],
                    "files": [
                        {
                            "path": "5f0c2a9e.jsonl",
                            "status": "imported",
                            "tool": "claude-code",
                            "session": "0b7c4a52-4f55-4f3e-9d43-3c1f0a6f3b2e",
                            "messages": 19,
                            "lines_read": 26,
                            "reason": "",
                            "stored_bytes": 48213,
                        }
                    ],
                },
            )
        ],
    )
    def post(self, request):
        tenant = request.user.tenant
        try:
            data = request.data
        except RequestDataTooBig as error:
            return error_response(str(error), status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        except SuspiciousOperation as error:  # e.g. more files than DATA_UPLOAD_MAX_NUMBER_FILES
            raise exceptions.ParseError(str(error)) from error
        body = ImportUploadSerializer(data=data)
        body.is_valid(raise_exception=True)
        files, names = body.validated_data["files"], body.validated_data["names"]
        total = sum(upload.size or 0 for upload in files)
        if total > settings.ACE_MAX_UPLOAD_BYTES:
            return error_response(
                f"The files hold {total} bytes; the limit is {settings.ACE_MAX_UPLOAD_BYTES} bytes per request.",
                status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        tool = body.validated_data["tool"]
        machine = body.validated_data.get("machine") or ""
        offsets = body.validated_data.get("offsets") or [None] * len(files)
        parts = [
            UploadPart(name=name, chunks=upload.chunks(), offset=offset)
            for upload, name, offset in zip(files, names, offsets, strict=True)
        ]
        try:
            stored = uploads_store(tenant=tenant, machine=machine, parts=parts, tool=tool)
        except UploadRejected as rejected:
            return error_response(rejected.detail, rejected.errors, status_code=rejected.status)
        refused = [(part.name, part.refused) for part in stored if part.refused]
        if not any(not part.refused for part in stored):
            errors = {f"files.{names.index(name)}": [f"{name}: {reason}"] for name, reason in refused}
            return error_response("No file could be imported: " + "; ".join(e[0] for e in errors.values()), errors)
        summary = import_files(
            tenant=tenant,
            paths=[part.path for part in stored if not part.refused],
            tool=tool,
            user_id=body.validated_data.get("user_id") or None,
            machine=machine,
        )
        root = upload_root(tenant, machine)
        for name, reason in refused:
            summary.add_refused(str(root / name), reason)
        prefix = str(root) + os.sep
        result = summary.as_dict(path_name=lambda path: path.removeprefix(prefix))
        for file in result["files"]:
            file["stored_bytes"] = stored_size(root / file["path"])
        return Response(ImportSummarySerializer(result).data, status=status.HTTP_201_CREATED)


class StoredFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The path the file was uploaded under (`paths`)")
    machine = serializers.CharField(help_text="The upload's `machine` ('' for none)")
    stored_bytes = serializers.IntegerField(help_text="Bytes of the file the server holds: send from here")
    head_sha256 = serializers.CharField(
        help_text=f"SHA-256 of the first {HEAD_BYTES} bytes held (fewer if it holds fewer): if the client's file "
        "starts otherwise, it was replaced, and is sent whole"
    )
    content_sha256 = serializers.CharField(
        help_text="For a whole-document `.json` log, SHA-256 of the whole copy held (else empty): the same hash "
        "locally means there is nothing to send"
    )
    tool = serializers.CharField()
    session = serializers.UUIDField(allow_null=True, source="session_id")
    imported_bytes = serializers.IntegerField(source="offset", help_text="Bytes read by the importer so far")
    last_imported_at = BoundedDateTimeField(allow_null=True)


class StoredFilesQuerySerializer(serializers.Serializer):
    machine = serializers.CharField(
        max_length=MACHINE_MAX_LENGTH, required=False, allow_blank=True, validators=[MACHINE_NAME]
    )
    path = serializers.ListField(
        child=serializers.CharField(max_length=1000),
        required=False,
        max_length=MAX_FILES,
        help_text=f"Only these paths (repeat the parameter, up to {MAX_FILES})",
    )


class StoredFilesPage(CursorPage):
    ordering = "path"


@extend_schema_view(
    get=extend_schema(
        summary="What the server holds of each uploaded log file", parameters=[StoredFilesQuerySerializer]
    )
)
class StoredFilesView(generics.ListAPIView):
    """The uploaded files the server holds for the caller's tenant (one machine's, with `machine`; without it,
    the uploads that named no machine), and how far each was received and imported: where a push client
    resumes. Another tenant's files are never listed."""

    serializer_class = StoredFileSerializer
    pagination_class = StoredFilesPage

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular building the schema
            return ImportedFile.objects.none()
        params = self.request.query_params
        query = StoredFilesQuerySerializer(data={"machine": params.get("machine", ""), "path": params.getlist("path")})
        query.is_valid(raise_exception=True)
        self.machine = query.validated_data.get("machine") or ""
        root = upload_root(self.request.user.tenant, self.machine)
        self.prefix = record_path(root) + "/"
        rows = ImportedFile.objects.filter(tenant=self.request.user.tenant, path__startswith=self.prefix)
        if query.validated_data.get("path"):
            names = [clean_relative_path(path) for path in query.validated_data["path"]]
            rows = rows.filter(path__in=[self.prefix + name for name in names if name])
        elif not self.machine:
            rows = rows.exclude(path__startswith=f"{self.prefix}{MACHINES_DIR}/")
        return rows.only(*_STORED_FIELDS)

    def paginate_queryset(self, queryset):
        """The page's rows, with what the server holds of each (its copy on this host, brought up to the storage
        first: its size and head)."""
        page = super().paginate_queryset(queryset)
        names = [record.path.removeprefix(self.prefix) for record in page]
        root = upload_cache_refresh(tenant=self.request.user.tenant, machine=self.machine, names=names)
        for record, name in zip(page, names, strict=True):
            stored = root / name
            record.stored_bytes = stored_size(stored)
            record.head_sha256 = head_sha256(stored, record.stored_bytes)
            record.content_sha256 = content_sha256(stored) if stored.name.endswith(".json") else ""
            record.machine = self.machine
            record.path = name
        return page


_STORED_FIELDS = ("id", "path", "tool", "session_id", "offset", "last_imported_at")
