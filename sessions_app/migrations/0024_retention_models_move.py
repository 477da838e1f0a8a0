# Placeholder (issue 31): the retention models' move to retention_app is filled in here.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0023_ingest_models_move")]
    operations = []
