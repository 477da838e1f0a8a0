from django.urls import path

from ingest_app.api.imports import ImportUploadView, StoredFilesView

urlpatterns = [
    path("imports/", ImportUploadView.as_view(), name="imports"),
    path("imports/files/", StoredFilesView.as_view(), name="import-files"),
]
