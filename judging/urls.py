from django.urls import path

from judging import model_views, views

urlpatterns = [
    path("leaderboard/", views.leaderboard_page, name="leaderboard"),
    path("leaderboard/judges/", views.cross_judge_page, name="cross_judge"),
    path("runs/", views.run_list, name="judging_runs"),
    path("runs/models/", model_views.language_models, name="language_models"),
    path("runs/generation/new/", views.generation_run_launch, name="generation_run_launch"),
    path("runs/judge/new/", views.judge_run_launch, name="judge_run_launch"),
    path("runs/generation/<int:pk>/", views.generation_run_detail, name="generation_run_detail"),
    path("runs/generation/<int:pk>/components/", views.components_run_launch, name="components_run_launch"),
    path("runs/<str:kind>/<int:pk>/<str:action>/", views.run_action, name="judging_run_action"),
]
