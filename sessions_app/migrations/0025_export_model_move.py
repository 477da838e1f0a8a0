# Placeholder (issue 31): the tenant export model's move to portability_app is filled in here.

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0024_retention_models_move")]
    operations = []
