from pathlib import Path

from django.db.backends.postgresql import base, client

from aceproject.embedded_db import ensure_embedded_server


class DatabaseClient(client.DatabaseClient):
    def runshell(self, parameters):
        self.connection.get_connection_params()  # `manage.py dbshell`: start the server, learn its socket
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self):
        if not self.settings_dict.get("HOST"):
            self.settings_dict["HOST"] = ensure_embedded_server(Path(self.settings_dict["ACE_DATA_DIR"]))
        return super().get_connection_params()
