"""Django's PostgreSQL backend that starts the embedded server on first connection (DATABASE_URL unset), and
again whenever a connection finds it down.

Starting it lazily means commands that never touch the database (`ace_db stop`, `makemigrations --check`,
`help`) don't start it. Starting it again on a failed connection means that whichever process finds it
down (a web worker, a Celery worker, beat) brings it back, and the service recovers by itself.
"""

from pathlib import Path

import psycopg
from django.db.backends.postgresql import base, client

from aceproject.embedded_db import ensure_embedded_server, restart_embedded_server_if_down


class EmbeddedServerUnavailable(psycopg.OperationalError):
    """The embedded server could not be started (Django wraps it as django.db.OperationalError)."""


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters):
        self.connection.get_connection_params()  # `manage.py dbshell`: start the server, learn its socket
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    @property
    def _data_dir(self) -> Path:
        return Path(self.settings_dict["ACE_DATA_DIR"])

    def get_connection_params(self):
        if not self.settings_dict.get("HOST"):
            try:
                self.settings_dict["HOST"] = ensure_embedded_server(self._data_dir)
            except Exception as error:  # noqa: BLE001 - pg_ctl, a data folder in use: the database is unavailable
                raise EmbeddedServerUnavailable(f"the embedded PostgreSQL could not be started: {error}") from error
        return super().get_connection_params()

    def get_new_connection(self, conn_params):
        try:
            return super().get_new_connection(conn_params)
        except psycopg.OperationalError as error:
            if error.sqlstate is not None:  # the server answered (a bad password, too many connections)
                raise
            try:
                socket_dir = restart_embedded_server_if_down(self._data_dir)
            except Exception as start_error:  # noqa: BLE001
                raise EmbeddedServerUnavailable(
                    f"the embedded PostgreSQL is down and could not be started: {start_error}"
                ) from error
            if socket_dir is None:
                raise
            self.settings_dict["HOST"] = socket_dir
            return super().get_new_connection({**conn_params, "host": socket_dir})
