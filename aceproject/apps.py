from django.apps import AppConfig


class AceProjectConfig(AppConfig):
    name = "aceproject"
    verbose_name = "Open ACE"
