"""Annotator entry points (/a/<study-slug>/) and the researchers' study pages (/studies/); the
study kinds' own pages last (``urls`` of a kind or kind source: the rubric editor's /rubrics/)."""

from django.urls import path, register_converter

from annotate.kinds import kind_routes
from annotate.participation import item_views, views
from annotate.reports import views as report_views
from annotate.review import views as review_views
from annotate.studies import data_views, preview_views
from annotate.studies import views as study_views
from annotate.url_converters import ItemIdConverter

app_name = "annotate"
register_converter(ItemIdConverter, "item_id")

urlpatterns = [
    # Annotators (no login; identified by the PID they arrived with, kept in their session).
    path("a/<slug:slug>/", views.entry, name="entry"),
    path("a/<slug:slug>/consent/", views.consent, name="consent"),
    path("a/<slug:slug>/training/", views.training, name="training"),
    path("a/<slug:slug>/training/<int:index>/", views.training, name="training_example"),
    path("a/<slug:slug>/work/", item_views.work, name="work"),
    path("a/<slug:slug>/work/<uuid:public_id>/save", item_views.save, name="save"),
    path("a/<slug:slug>/work/<uuid:public_id>/submit", item_views.submit, name="submit"),
    path("a/<slug:slug>/done/", views.done, name="done"),
    # Researchers.
    path("studies/", study_views.study_index, name="study_list"),
    path("studies/new/", study_views.study_new, name="study_new"),
    path("studies/imports/<int:pk>/", study_views.study_import, name="study_import"),
    path("studies/<slug:slug>/", study_views.study_detail, name="study_detail"),
    path("studies/<slug:slug>/settings/", study_views.study_settings, name="study_settings"),
    path("studies/<slug:slug>/rounds/", study_views.study_round_new, name="study_round_new"),
    path(
        "studies/<slug:slug>/participants/<int:participation_id>/release/",
        study_views.participant_release,
        name="participant_release",
    ),
    path("studies/<slug:slug>/export.<str:fmt>", study_views.study_export, name="study_export"),
    # The data manager: the items table, its bulk actions, items added to a running study.
    path("studies/<slug:slug>/data/", data_views.study_data, name="study_data"),
    path("studies/<slug:slug>/data/actions/", data_views.study_data_action, name="study_data_action"),
    path("studies/<slug:slug>/data/items/", data_views.study_data_add_items, name="study_data_add_items"),
    # Preview (nothing stored) and test participants (stored, left out of k and reports).
    path("studies/<slug:slug>/preview/", preview_views.preview_consent, name="preview"),
    path("studies/<slug:slug>/preview/training/", preview_views.preview_training, name="preview_training"),
    path(
        "studies/<slug:slug>/preview/training/<int:index>/",
        preview_views.preview_training,
        name="preview_training_example",
    ),
    path("studies/<slug:slug>/preview/items/<int:number>/", preview_views.preview_item, name="preview_item"),
    path("studies/<slug:slug>/preview/items/<int:number>/save", preview_views.preview_save, name="preview_save"),
    path("studies/<slug:slug>/preview/items/<int:number>/submit", preview_views.preview_submit, name="preview_submit"),
    path("studies/<slug:slug>/preview/done/", preview_views.preview_done, name="preview_done"),
    path("studies/<slug:slug>/test-participant/", study_views.study_test_participant, name="study_test_participant"),
    path("studies/<slug:slug>/tiers/<str:tier>.jsonl", study_views.study_choice_tier, name="study_choice_tier"),
    # Agreement dashboards.
    path("studies/<slug:slug>/agreement/", report_views.agreement, name="report_agreement"),
    path("studies/<slug:slug>/annotators/", report_views.annotators, name="report_annotators"),
    path("studies/<slug:slug>/disagreements/", report_views.disagreements, name="report_disagreements"),
    # path: an item id is the importer's own and may hold "/" ("batch/1"); nothing else lives under items/.
    path("studies/<slug:slug>/items/<item_id:item_id>/", report_views.item_views, name="report_item"),
    path("studies/<slug:slug>/metrics/", report_views.metric_agreement, name="report_metric_agreement"),
    # Review and adjudication.
    path("studies/<slug:slug>/review/", review_views.review, name="review"),
    path("studies/<slug:slug>/review/bulk", review_views.review_bulk, name="review_bulk"),
    path(
        "studies/<slug:slug>/review/gold-qualification",
        review_views.review_gold_qualification,
        name="review_gold_qualification",
    ),
    path("studies/<slug:slug>/review/items/<item_id:item_id>/", review_views.review_item, name="review_item"),
    # The study kinds' own pages (annotate/kinds/<kind>/urls.py), in this namespace.
    *kind_routes("urlpatterns"),
]
