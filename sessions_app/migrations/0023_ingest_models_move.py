# Placeholder (issue 31): the ingest models' move to ingest_app is filled in here.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0022_finite_numbers")]
    operations = []
