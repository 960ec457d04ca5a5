from django.apps import AppConfig


class ProlificConfig(AppConfig):
    name = "prolific"
    verbose_name = "Prolific: publish studies, sync submissions, review and pay participants"

    def ready(self) -> None:
        # The Prolific panel on annotate's study page, without annotate importing prolific.
        from annotate.panels import study_panel_register
        from prolific.views import study_panel

        study_panel_register(study_panel)
        # A study that reaches its target interval width closes its Prolific study.
        from annotate.participation.allocation_services import target_reached_hook_register
        from prolific.allocation import prolific_target_reached

        target_reached_hook_register(prolific_target_reached)
