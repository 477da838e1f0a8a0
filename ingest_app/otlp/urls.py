from django.urls import path

from ingest_app.otlp import views

urlpatterns = [
    path("logs", views.logs, name="otlp-logs"),
    path("metrics", views.metrics, name="otlp-metrics"),
]
