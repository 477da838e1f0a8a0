"""Moving memory between tenants and instances: the import of what `selectors.export` writes (docs/portability.md)."""
