from django.urls import path
from rest_framework.routers import DefaultRouter

from sessions_app.api import views
from sessions_app.api.budgets import BudgetViewSet
from sessions_app.api.forget import UserForgetView
from sessions_app.api.plans import BlocksView, PlanViewSet, WeeklyView

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("sessions", views.SessionViewSet, basename="session")
router.register("messages", views.MessageViewSet, basename="message")
router.register("conversations", views.ConversationViewSet, basename="conversation")
router.register("turns", views.TurnViewSet, basename="turn")
router.register("budgets", BudgetViewSet, basename="budget")
router.register("plans", PlanViewSet, basename="plan")

urlpatterns = [
    path("stats/", views.StatsView.as_view(), name="stats"),
    path("usage/blocks/", BlocksView.as_view(), name="usage-blocks"),
    path("usage/weekly/", WeeklyView.as_view(), name="usage-weekly"),
    path("users/<path:user_id>/forget/", UserForgetView.as_view(), name="user-forget"),
    *router.urls,
]
