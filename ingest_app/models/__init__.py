"""The models of the ingest side: the import sources and how far each log file has been read (imports), and
the raw telemetry an OpenTelemetry exporter sent (telemetry). Their tables moved here from sessions_app
(migrations: sessions_app 0023, ingest_app 0001-0002)."""

from ingest_app.models.imports import ImportedFile, ImportSource, ImportTool, UploadSegment
from ingest_app.models.telemetry import TelemetryKind, TelemetryRecord

__all__ = ["ImportSource", "ImportTool", "ImportedFile", "TelemetryKind", "TelemetryRecord", "UploadSegment"]
