from django.urls import path

from llm import views

urlpatterns = [
    path("llm/", views.overview, name="llm_overview"),
    path("llm/jobs/<int:pk>/<str:action>/", views.job_action, name="llm_job_action"),
    path("llm/ledger/", views.ledger, name="llm_ledger"),
    path("llm/ledger/<int:pk>/", views.ledger_entry, name="llm_ledger_entry"),
]
