from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "LLM endpoints"

    def ready(self) -> None:
        from core.selectors import llm_role_rows_provider_register
        from llm.endpoint_selectors import role_endpoint_rows

        llm_role_rows_provider_register(role_endpoint_rows)
