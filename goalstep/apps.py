from django.apps import AppConfig


class GoalstepConfig(AppConfig):
    name = "goalstep"
    verbose_name = "Goal-step tasks: step inference, goal inference, step ordering"
