"""The ingest side: what comes in from agents' own records (log files, uploads, OTLP, the push client) and is
written to the ledger (sessions_app) through its services. The ledger never imports this app."""
