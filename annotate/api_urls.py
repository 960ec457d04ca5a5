"""REST API routes of studies (annotate/studies/apis.py, item_apis.py, participant_apis.py) and their
reports (annotate/reports/apis.py), and the study kinds' own endpoints (``urls`` of a kind or kind
source: the rubric editor's /api/rubrics/), mounted under /api/ by config/urls.py."""

from django.urls import path

from annotate.kinds import kind_routes
from annotate.reports import apis as report_apis
from annotate.review import apis as review_apis
from annotate.studies import apis, data_apis, item_apis, participant_apis

urlpatterns: list = [
    # The study kinds' own endpoints (annotate/kinds/<kind>/urls.py).
    *kind_routes("api_urlpatterns"),
    path("studies/", apis.StudyListCreateView.as_view(), name="api-study-list"),
    path("studies/imports/<int:pk>/", apis.StudyImportView.as_view(), name="api-study-import"),
    path("studies/<slug:slug>/", apis.StudyDetailView.as_view(), name="api-study-detail"),
    path("studies/<slug:slug>/rounds/", apis.StudyRoundsView.as_view(), name="api-study-rounds"),
    path("studies/<slug:slug>/items/", item_apis.StudyItemListView.as_view(), name="api-study-items"),
    path("studies/<slug:slug>/annotations/", item_apis.StudyAnnotationListView.as_view(), name="api-study-annotations"),
    path("studies/<slug:slug>/export/", item_apis.StudyExportView.as_view(), name="api-study-export"),
    path("studies/<slug:slug>/data/", data_apis.StudyDataView.as_view(), name="api-study-data"),
    path("studies/<slug:slug>/data/actions/", data_apis.StudyDataActionView.as_view(), name="api-study-data-actions"),
    path("studies/<slug:slug>/data/items/", data_apis.StudyItemsAddView.as_view(), name="api-study-data-items"),
    path(
        "studies/<slug:slug>/participants/",
        participant_apis.StudyParticipantListView.as_view(),
        name="api-study-participants",
    ),
    path(
        "studies/<slug:slug>/participants/<int:pk>/release/",
        participant_apis.ParticipantReleaseView.as_view(),
        name="api-study-participant-release",
    ),
    path("studies/<slug:slug>/report/", report_apis.StudyReportView.as_view(), name="api-study-report"),
    path("studies/<slug:slug>/reviews/", review_apis.StudyReviewView.as_view(), name="api-study-reviews"),
    path(
        "studies/<slug:slug>/annotations/<int:pk>/reviews/",
        review_apis.AnnotationReviewHistoryView.as_view(),
        name="api-annotation-reviews",
    ),
    path("studies/<slug:slug>/gold/", review_apis.StudyGoldView.as_view(), name="api-study-gold"),
    path(
        "studies/<slug:slug>/gold-agreement/",
        review_apis.StudyGoldAgreementView.as_view(),
        name="api-study-gold-agreement",
    ),
    path(
        "studies/<slug:slug>/gold-qualification/",
        review_apis.StudyGoldQualificationView.as_view(),
        name="api-study-gold-qualification",
    ),
]
