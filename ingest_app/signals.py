"""Signals of the ingest side, for the apps above it (webhooks_app); sent after the writing transaction commits.

`ingest_app` never imports the apps that listen here.
"""

from django.dispatch import Signal

# sender=the ImportedFile model; kwargs: tenant_id, origin ("path": ace_import or a path given to the service,
# "upload": POST /api/v1/imports/, "source": the collector's scan of an import source), source_id (the import
# source's id, or None), summary (a JSON-ready dict: ImportSummary.as_dict() without its per-file list and
# issues, which hold server paths: the counts, `issues_total` and the one-line `summary`). Sent once per
# finished import, after its last batch committed, whether or not it found anything new.
import_finished = Signal()
