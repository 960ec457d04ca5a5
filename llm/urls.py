from django.urls import path

from llm import endpoint_views, views

urlpatterns = [
    path("llm/", views.overview, name="llm_overview"),
    path("llm/jobs/<int:pk>/<str:action>/", views.job_action, name="llm_job_action"),
    path("llm/ledger/", views.ledger, name="llm_ledger"),
    path("llm/ledger/<int:pk>/", views.ledger_entry, name="llm_ledger_entry"),
    path("llm/endpoints/", endpoint_views.endpoint_list, name="llm_endpoints"),
    path("llm/endpoints/new/", endpoint_views.endpoint_add, name="llm_endpoint_add"),
    path("llm/endpoints/roles/", endpoint_views.endpoint_role_assign_view, name="llm_endpoint_role_assign"),
    path("llm/endpoints/<int:pk>/", endpoint_views.endpoint_edit, name="llm_endpoint_edit"),
    path("llm/endpoints/<int:pk>/test/", endpoint_views.endpoint_test, name="llm_endpoint_test"),
    path("llm/endpoints/<int:pk>/retire/", endpoint_views.endpoint_retire, name="llm_endpoint_retire"),
]
