"""REST API of the Prolific integration (prolific/*_apis.py), mounted under /api/ by config/urls.py."""

from django.urls import path

from prolific import bonus_apis, publish_apis, review_apis, sync_apis, token_apis, webhook_apis, webhook_views

urlpatterns: list = [
    path("prolific/token/", token_apis.ProlificTokenView.as_view(), name="api-prolific-token"),
    path("prolific/webhook/", webhook_views.webhook, name="prolific-webhook"),
    path("prolific/webhooks/", webhook_apis.WebhookSubscriptionsView.as_view(), name="api-prolific-webhooks"),
    path("studies/<slug:slug>/prolific/", publish_apis.ProlificStateView.as_view(), name="api-prolific-state"),
    path("studies/<slug:slug>/prolific/publish/", publish_apis.PublishView.as_view(), name="api-prolific-publish"),
    path(
        "studies/<slug:slug>/prolific/publish-now/",
        publish_apis.PublishNowView.as_view(),
        name="api-prolific-publish-now",
    ),
    path("studies/<slug:slug>/prolific/sync/", sync_apis.SyncView.as_view(), name="api-prolific-sync"),
    path("studies/<slug:slug>/prolific/review/", review_apis.ReviewView.as_view(), name="api-prolific-review"),
    path(
        "studies/<slug:slug>/prolific/bonus/preview/",
        bonus_apis.BonusPreviewView.as_view(),
        name="api-prolific-bonus-preview",
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/pay/",
        bonus_apis.BonusPayView.as_view(),
        name="api-prolific-bonus-pay",
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/resolve/",
        bonus_apis.BonusResolveView.as_view(),
        name="api-prolific-bonus-resolve",
    ),
    path(
        "studies/<slug:slug>/prolific/bonus/<int:pk>/reconcile/",
        bonus_apis.BonusReconcileView.as_view(),
        name="api-prolific-bonus-reconcile",
    ),
    path(
        "studies/<slug:slug>/prolific/submissions/",
        sync_apis.SubmissionListView.as_view(),
        name="api-prolific-submissions",
    ),
    path("studies/<slug:slug>/prolific/log/", sync_apis.RequestLogView.as_view(), name="api-prolific-log"),
]
