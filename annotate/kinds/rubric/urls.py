"""The rubric editor's routes (``SOURCE.urls``): its pages, in annotate's URL namespace
(``annotate:rubric_list``, ``annotate:rubric_new``), and its endpoint under /api/
(``api-rubric-list``), included by annotate/urls.py and annotate/api_urls.py."""

from django.urls import path

from annotate.kinds.rubric import apis, views

urlpatterns = [
    path("rubrics/", views.rubric_index, name="rubric_list"),
    path("rubrics/new/", views.rubric_new, name="rubric_new"),
]

api_urlpatterns = [
    path("rubrics/", apis.RubricListCreateView.as_view(), name="api-rubric-list"),
]
