"""Memory strategies: versioned rules, extractors, consolidation and their Celery runs (issue 5)."""
