"""REST API of the Prolific integration (prolific/apis.py), mounted under /api/ by config/urls.py."""

from django.urls import path

from prolific import apis, webhook_views

urlpatterns: list = [
    path("prolific/token/", apis.ProlificTokenView.as_view(), name="api-prolific-token"),
    path("prolific/webhook/", webhook_views.webhook, name="prolific-webhook"),
    path("prolific/webhooks/", apis.WebhookSubscriptionsView.as_view(), name="api-prolific-webhooks"),
    path("studies/<slug:slug>/prolific/", apis.ProlificStateView.as_view(), name="api-prolific-state"),
    path("studies/<slug:slug>/prolific/publish/", apis.PublishView.as_view(), name="api-prolific-publish"),
    path("studies/<slug:slug>/prolific/publish-now/", apis.PublishNowView.as_view(), name="api-prolific-publish-now"),
    path("studies/<slug:slug>/prolific/sync/", apis.SyncView.as_view(), name="api-prolific-sync"),
    path("studies/<slug:slug>/prolific/review/", apis.ReviewView.as_view(), name="api-prolific-review"),
    path(
        "studies/<slug:slug>/prolific/bonus/preview/",
        apis.BonusPreviewView.as_view(),
        name="api-prolific-bonus-preview",
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/pay/", apis.BonusPayView.as_view(), name="api-prolific-bonus-pay"
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/resolve/",
        apis.BonusResolveView.as_view(),
        name="api-prolific-bonus-resolve",
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/reconcile/",
        apis.BonusReconcileView.as_view(),
        name="api-prolific-bonus-reconcile",
    ),
    path(
        "studies/<slug:slug>/prolific/submissions/", apis.SubmissionListView.as_view(), name="api-prolific-submissions"
    ),
    path("studies/<slug:slug>/prolific/log/", apis.RequestLogView.as_view(), name="api-prolific-log"),
]
