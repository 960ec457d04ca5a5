from django.urls import path

from goalstep import views

urlpatterns = [
    path("goalstep/", views.task_set_index, name="goalstep_task_sets"),
    path("goalstep/sets/<int:pk>/", views.task_set_detail, name="goalstep_task_set"),
    path("goalstep/evaluations/new/", views.evaluation_launch, name="goalstep_evaluation_launch"),
    path("goalstep/evaluations/<int:pk>/<str:action>/", views.evaluation_action, name="goalstep_evaluation_action"),
    path("goalstep/<str:task>/", views.leaderboard_page, name="goalstep_leaderboard"),
]
