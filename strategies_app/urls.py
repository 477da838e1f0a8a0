from rest_framework.routers import DefaultRouter

from strategies_app import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("strategies", views.StrategyViewSet, basename="strategy")
router.register("strategy-runs", views.StrategyRunViewSet, basename="strategy-run")

urlpatterns = router.urls
