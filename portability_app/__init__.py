"""Portability, a cross-app feature in a room of its own: a tenant's whole export (a zip of every app's rows), and
the memory export and import between installations."""
