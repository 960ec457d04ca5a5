from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
    verbose_name = "Judging: generations, How2Score judgments, leaderboards"

    def ready(self) -> None:
        from judging.panels import generations_panel
        from mining.panels import procedure_panel_register

        procedure_panel_register(generations_panel)
