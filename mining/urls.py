from django.urls import path

from mining import views

urlpatterns = [
    path("", views.home, name="home"),
    path("procedures/", views.procedure_index, name="procedure_list"),
    path("procedures/<int:pk>/", views.procedure_detail, name="procedure_detail"),
]
