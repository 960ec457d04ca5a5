from django.urls import path

from coscript import views

urlpatterns = [
    path("coscript/", views.coscript_index, name="coscript_runs"),
    path("coscript/runs/new/", views.coscript_run_launch, name="coscript_run_launch"),
    path("coscript/runs/<int:pk>/", views.coscript_run_page, name="coscript_run_detail"),
    path("coscript/runs/<int:pk>/filter/", views.coscript_run_refilter, name="coscript_run_refilter"),
    path("coscript/runs/<int:pk>/export/", views.coscript_run_export, name="coscript_run_export"),
    path("coscript/runs/<int:pk>/benchmark/", views.coscript_run_benchmark, name="coscript_run_benchmark"),
    path("coscript/runs/<int:pk>/<str:action>/", views.coscript_run_action, name="coscript_run_action"),
    path("coscript/review/", views.coscript_review, name="coscript_review"),
    path("coscript/review/<int:pk>/", views.coscript_review_decide, name="coscript_review_decide"),
]
