"""Pages of the Prolific integration (study page panels, the researcher's Prolific token)."""

from django.urls import path

from prolific import views

app_name = "prolific"

urlpatterns = [
    path("account/prolific/", views.token, name="token"),
    path("studies/<slug:slug>/prolific/publish/", views.publish, name="publish"),
    path("studies/<slug:slug>/prolific/publish-now/", views.publish_now, name="publish_now"),
    path("studies/<slug:slug>/prolific/sync/", views.sync, name="sync"),
    path("studies/<slug:slug>/prolific/review/", views.review, name="review"),
    path("studies/<slug:slug>/prolific/bonus/preview/", views.bonus_preview, name="bonus_preview"),
    path("studies/<slug:slug>/prolific/bonus/<int:batch_id>/pay/", views.bonus_pay, name="bonus_pay"),
    path("studies/<slug:slug>/prolific/bonus/<int:batch_id>/resolve/", views.bonus_resolve, name="bonus_resolve"),
    path("studies/<slug:slug>/prolific/bonus/<int:batch_id>/reconcile/", views.bonus_reconcile, name="bonus_reconcile"),
    path("account/prolific/webhooks/", views.webhooks_subscribe, name="webhooks_subscribe"),
]
