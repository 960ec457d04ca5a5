from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Annotation: studies, annotators, agreement"

    def ready(self) -> None:
        # Human labels feed two judging features without judging importing annotate: the
        # calibrated How2Score on the leaderboard and the exclusion of annotated examples
        # from distillation data.
        from annotate.reports.selectors import calibration_from_studies, generations_in_studies
        from judging.calibration import calibration_provider_register
        from judging.distillation import distillation_exclusion_register

        calibration_provider_register(calibration_from_studies)
        distillation_exclusion_register(generations_in_studies)
        # What each study kind installed now sets up with other apps (its ``ready_function``);
        # from now on the registry asks its sources (the stored rubrics) for kinds it lacks.
        from annotate.kinds import kinds_ready

        kinds_ready()
        # The allocation panel on the study page (policy, annotations used, width against target).
        from annotate.panels import study_panel_register
        from annotate.participation.allocation_views import allocation_panel

        study_panel_register(allocation_panel)
