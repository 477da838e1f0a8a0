"""Validators of the ledger's fields, for its API and the other apps' (an upload's machine, ingest_app.api)."""

from django.core.validators import RegexValidator

from sessions_app.schema import MACHINE_PATTERN

# A machine label: a host name's characters (a folder name on the server for uploaded files).
# Empty is allowed (no machine): the pattern says so, for the schema (DRF skips validators on a blank value).
MACHINE_NAME = RegexValidator(
    rf"\A(?:{MACHINE_PATTERN})?\Z", "Letters, digits, '.', '_' and '-' only, starting with a letter or digit."
)
