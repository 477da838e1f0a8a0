"""`POST /api/v1/imports/`: upload agent-log files (Claude Code, Qwen Code, OpenClaw) and import them.

Uploads are kept under `$ACE_DATA_DIR/uploads/<tenant id>/<path>`, so uploading the same file again
after it grew imports only its new lines (the importer keeps each file's offset). A request is checked
whole before anything is stored: a bad field, a name that is not `.jsonl`, or a file no parser
recognises (when no file is left to import) is a 400 that writes nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from platform_kit.api.errors import error_response
from sessions_app.models import ImportTool
from sessions_app.services.imports import file_refusal, import_files

_UNSAFE = re.compile(r"[^\w.@+\-]")
MAX_FILES = 100


def upload_root(tenant) -> Path:
    return settings.ACE_DATA_DIR / "uploads" / str(tenant.pk)


def clean_relative_path(name: str) -> str | None:
    """A safe relative path from a client's file name or path (`proj/sess/subagents/agent-1.jsonl`)."""
    parts = [part for part in PurePosixPath(name.replace("\\", "/")).parts if part not in ("", ".", "/")]
    if not parts or any(part == ".." for part in parts) or len(parts) > 8:
        return None
    cleaned = [_UNSAFE.sub("_", part)[:200] for part in parts]
    if not cleaned[-1].endswith(".jsonl") or cleaned[-1] == ".jsonl":
        return None
    return "/".join(cleaned)


class ImportUploadSerializer(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False),
        allow_empty=False,
        max_length=MAX_FILES,
        help_text="One or more agent-log files (.jsonl). Send the whole file each time: only new lines are read.",
    )
    paths = serializers.ListField(
        child=serializers.CharField(max_length=1000),
        required=False,
        help_text="Optional, one per file in the same order: where the file lives relative to the tool's home "
        "(e.g. `.claude/projects/-home-dev-app/<session>/subagents/agent-1.jsonl`), so sub-agent files and "
        "re-uploads are recognised. Default: the file's name.",
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
        names, errors = [], {}
        for index, upload in enumerate(files):
            wanted = paths[index] if paths is not None else upload.name or ""
            name = clean_relative_path(wanted)
            if name is None and wanted.lower().endswith((".db", ".db-wal", ".sqlite")):
                errors[f"files.{index}"] = [
                    f"{wanted!r}: an OpenCode database (or another SQLite file) cannot be uploaded: it is rewritten "
                    "in place, so its new bytes are not a log's new lines. Import it where it lives: "
                    "`manage.py ace_import ~/.local/share/opencode`."
                ]
            elif name is None:
                errors[f"files.{index}"] = [f"{wanted!r}: a relative path of a .jsonl file is expected."]
            elif name in names:
                errors[f"files.{index}"] = [f"{name!r} is uploaded twice in this request."]
            names.append(name)
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
    status = serializers.ChoiceField(choices=["imported", "unchanged", "refused"])
    tool = serializers.CharField()
    session = serializers.UUIDField(allow_null=True)
    messages = serializers.IntegerField(help_text="Messages imported from this file by this request")
    lines_read = serializers.IntegerField()
    reason = serializers.CharField(help_text="Why the file was refused")
    streaming = serializers.IntegerField(
        help_text="Responses stored whose last lines have not arrived yet (completed in place when they do)"
    )


class ImportSummarySerializer(serializers.Serializer):
    summary = serializers.CharField(help_text="One line, as `manage.py ace_import` prints it")
    files_seen = serializers.IntegerField()
    files_imported = serializers.IntegerField()
    files_unchanged = serializers.IntegerField()
    files_refused = serializers.IntegerField()
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
        summary="Upload agent logs (Claude Code, Qwen Code, OpenClaw) and import them",
        description="multipart/form-data with one or more `files` (.jsonl). Re-uploading a file that grew "
        "imports only its new lines; re-uploading the same bytes imports nothing. A file no parser "
        "recognises is refused with the reason (400 when no file is left to import).",
        request={"multipart/form-data": ImportUploadSerializer},
        responses={201: ImportSummarySerializer},
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
        root = upload_root(tenant)
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=root))
        try:
            staged, refused = [], []
            for upload, name in zip(files, names, strict=True):
                # Staged under the same relative path, so detection sees the layout the file will have.
                temporary = staging / name
                temporary.parent.mkdir(parents=True, exist_ok=True)
                with temporary.open("wb") as handle:
                    for chunk in upload.chunks():
                        handle.write(chunk)
                refusal = file_refusal(temporary, tool=tool)
                if refusal is not None:
                    refused.append((name, refusal.message))
                else:
                    staged.append((temporary, root / name))
            if not staged:
                errors = {f"files.{names.index(name)}": [f"{name}: {reason}"] for name, reason in refused}
                return error_response("No file could be imported: " + "; ".join(e[0] for e in errors.values()), errors)
            for temporary, final in staged:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temporary, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        summary = import_files(
            tenant=tenant,
            paths=[final for _, final in staged],
            tool=tool,
            user_id=body.validated_data.get("user_id") or None,
        )
        for name, reason in refused:
            summary.add_refused(str(root / name), reason)
        prefix = str(root) + os.sep
        result = summary.as_dict(path_name=lambda path: path.removeprefix(prefix))
        return Response(ImportSummarySerializer(result).data, status=status.HTTP_201_CREATED)
