"""Moving memory between tenants and instances: the import of what `memory_app.selectors.export` writes
(docs/portability.md): `lines` checks a file, `importer` imports it (`records_import`)."""
