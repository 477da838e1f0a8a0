"""Agent-log imports: the directories the collector scans, and how far each log file has been read."""

import uuid

from django.contrib.postgres.indexes import OpClass
from django.db import models
from django.db.models import F
from django.utils import timezone

from sessions_app.models import Session, Tenant


class ImportTool(models.TextChoices):
    AUTO = "auto", "auto (detect per file)"
    CLAUDE_CODE = "claude-code", "Claude Code"
    QWEN_CODE = "qwen-code", "Qwen Code"
    OPENCLAW = "openclaw", "OpenClaw"
    CODEX = "codex", "Codex CLI"
    GEMINI_CLI = "gemini-cli", "Gemini CLI"
    OPENCODE = "opencode", "OpenCode"


class ImportSource(models.Model):
    """A directory of agent logs that the collector (`ingest_app.tasks.collect_imports`) scans."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="import_sources")
    path = models.CharField(
        max_length=1024, help_text="A directory (or one file) on the server, e.g. ~/.claude/projects"
    )
    tool = models.CharField(max_length=16, choices=ImportTool.choices, default=ImportTool.AUTO)
    user_id = models.CharField(
        "user ID",
        max_length=255,
        blank=True,
        help_text="Attribute the sessions to this user (default: the log's or the OS user)",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_scan_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_summary = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        ordering = ["tenant", "path"]
        constraints = [models.UniqueConstraint(fields=["tenant", "path"], name="importsource_tenant_path")]

    def __str__(self):
        return self.path


class ImportedFile(models.Model):
    """How far one log file has been imported: the byte offset and the parser's carry after the last batch."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    source = models.ForeignKey(
        ImportSource, null=True, blank=True, on_delete=models.SET_NULL, related_name="files", db_index=False
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    path = models.TextField()
    tool = models.CharField(max_length=16, blank=True)
    agent_session_id = models.CharField("agent session ID", max_length=255, blank=True)
    size = models.BigIntegerField(default=0, help_text="Bytes, when last imported")
    mtime = models.DateTimeField(null=True, blank=True)
    device = models.BigIntegerField(null=True, blank=True)
    inode = models.BigIntegerField(null=True, blank=True)
    head_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the first bytes: a different head means a replaced file"
    )
    offset = models.BigIntegerField(default=0, help_text="Bytes consumed: the next import starts here")
    carry = models.JSONField(default=dict, blank=True, help_text="The parser's state at `offset`")
    pending = models.IntegerField(
        default=0, help_text="Responses stored whose last lines have not arrived yet (completed in place when they do)"
    )
    lines_read = models.BigIntegerField(default=0)
    messages_imported = models.BigIntegerField(default=0)
    issues = models.IntegerField(default=0, help_text="Lines skipped or read with a caveat, all imports")
    last_error = models.TextField(blank=True)
    first_imported_at = models.DateTimeField(null=True, blank=True)
    last_imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["path"]
        constraints = [models.UniqueConstraint(fields=["tenant", "path"], name="importedfile_tenant_path")]
        indexes = [models.Index(fields=["source", "path"], name="importedfile_source")]

    def __str__(self):
        return self.path


class UploadSegment(models.Model):
    """A run of an uploaded log file's bytes as the server received it (`ingest_app.pipeline.uploads`): the
    whole file (from 0), or bytes appended at `start`. Its bytes are in the storage every host reads
    (platform_kit.storage, `storage_name`); the file is its segments in order. A host's copy under
    ACE_DATA_DIR/uploads is a cache made from them."""

    id = models.UUIDField("ID", primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    machine = models.CharField(max_length=100, blank=True, help_text="The upload's `machine` ('' for none)")
    path = models.TextField(help_text="The path the file was uploaded under")
    start = models.BigIntegerField(help_text="Where its bytes start in the file")
    length = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "machine", "path", "start"], name="uploadsegment_place")
        ]
        indexes = [  # the files held under a folder (`path LIKE 'a/%'`): a path in the way of another
            models.Index(
                F("tenant"), F("machine"), OpClass(F("path"), name="text_pattern_ops"), name="uploadsegment_folders"
            )
        ]

    def __str__(self):
        return f"{self.path} [{self.start}, {self.start + self.length})"

    @property
    def storage_name(self) -> str:
        return f"{self.tenant_id}/uploads/{self.pk}"
