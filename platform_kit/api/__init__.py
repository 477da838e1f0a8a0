"""The API kit: one error shape, cursor pages, strict fields, bearer-key authentication and tenant scoping."""
