"""REST API of LLM endpoint records, mounted under /api/ by config/urls.py (views in
llm/endpoint_apis.py)."""

from django.urls import path

from llm import endpoint_apis

urlpatterns: list = [
    path("llm/endpoints/", endpoint_apis.EndpointRecordListView.as_view(), name="llm-endpoint-list"),
    path("llm/endpoints/<int:pk>/", endpoint_apis.EndpointRecordDetailView.as_view(), name="llm-endpoint-detail"),
    path("llm/endpoints/<int:pk>/test/", endpoint_apis.EndpointRecordTestView.as_view(), name="llm-endpoint-test"),
    path(
        "llm/endpoints/<int:pk>/retire/", endpoint_apis.EndpointRecordRetireView.as_view(), name="llm-endpoint-retire"
    ),
    path(
        "llm/endpoints/<int:pk>/unretire/",
        endpoint_apis.EndpointRecordUnretireView.as_view(),
        name="llm-endpoint-unretire",
    ),
    path("llm/roles/", endpoint_apis.RoleAssignmentView.as_view(), name="llm-role-list"),
]
