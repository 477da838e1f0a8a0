from pathlib import Path

from django.db.backends.postgresql import base

from aceproject.embedded_db import ensure_embedded_server


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        if not self.settings_dict.get("HOST"):
            self.settings_dict["HOST"] = ensure_embedded_server(Path(self.settings_dict["ACE_DATA_DIR"]))
        return super().get_connection_params()
