from rest_framework.routers import DefaultRouter

from portability_app.api.exports import TenantExportViewSet
from portability_app.api.memory import MemoryPortabilityViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("exports", TenantExportViewSet, basename="export")
# records/export/ and records/import/ (URL names record-export, record-import): included before memory_app's
# URLs (aceproject/urls.py), whose records/{id}/ would take them.
router.register("records", MemoryPortabilityViewSet, basename="record")

urlpatterns = [*router.urls]
