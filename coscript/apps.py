from django.apps import AppConfig


class CoscriptConfig(AppConfig):
    name = "coscript"
    verbose_name = "CoScript: constrained goals and over-generate-then-filter scripts"
