"""More REST API routes of judging, mounted under /api/ by config/urls.py."""

from django.urls import path

from judging import model_apis

urlpatterns: list = [
    # Registered models (judging/model_apis.py).
    path("judging/models/", model_apis.LanguageModelListView.as_view(), name="language-model-list"),
    path("judging/models/<int:pk>/", model_apis.LanguageModelDetailView.as_view(), name="language-model-detail"),
]
