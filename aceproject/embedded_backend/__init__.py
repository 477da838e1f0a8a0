"""Django's PostgreSQL backend that starts the embedded server on first connection (DATABASE_URL unset).

Starting it lazily means commands that never touch the database (`ace_db stop`, `makemigrations --check`,
`help`) don't start it.
"""
