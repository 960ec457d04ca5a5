from django.urls import path

from mining import views

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
]
