from django.urls import path

from mining import run_views, views

urlpatterns = [
    path("", views.home, name="home"),
    path("procedures/", views.procedure_index, name="procedure_list"),
    path("procedures/<int:pk>/", views.procedure_detail, name="procedure_detail"),
    path("corpora/", views.corpus_index, name="corpus_list"),
    path("corpora/new/", views.corpus_upload, name="corpus_upload"),
    path("corpora/imports/<int:pk>/", views.corpus_import_detail, name="corpus_import_detail"),
    path("corpora/<int:pk>/", views.corpus_detail, name="corpus_detail"),
    path("corpora/<int:pk>/documents/<int:document_pk>/", views.document_detail, name="document_detail"),
    path("splits/", views.split_index, name="split_list"),
    path("splits/<int:pk>/", views.split_detail, name="split_detail"),
    path("mining/runs/", run_views.mining_run_index, name="mining_run_list"),
    path("mining/runs/new/", run_views.mining_run_launch, name="mining_run_launch"),
    path("mining/runs/<int:pk>/", run_views.mining_run_detail, name="mining_run_detail"),
    path("mining/runs/<int:pk>/stages/", run_views.mining_run_change_stages, name="mining_run_change_stages"),
    path("mining/runs/<int:pk>/documents/", run_views.mining_run_documents, name="mining_run_documents"),
    path(
        "mining/runs/<int:pk>/documents/<int:candidate_pk>/", run_views.mining_run_document, name="mining_run_document"
    ),
    path("mining/runs/<int:pk>/<str:action>/", run_views.mining_run_action, name="mining_run_action"),
]
