from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "LLM endpoints"

    def ready(self) -> None:
        from core.selectors import llm_role_rows_provider_register
        from llm.endpoint_selectors import role_endpoint_rows

        llm_role_rows_provider_register(role_endpoint_rows)

        # A role's recently resolved endpoint (llm.endpoints.endpoint_require_recent) is
        # forgotten when its record, its assignment or the settings change in this process.
        from django.core.signals import setting_changed
        from django.db.models.signals import post_delete, post_save

        from llm.endpoints import endpoint_recent_forget
        from llm.models import EndpointRecord, EndpointRoleAssignment

        for model in (EndpointRecord, EndpointRoleAssignment):
            post_save.connect(endpoint_recent_forget, sender=model, dispatch_uid=f"endpoint-recent-{model.__name__}")
            post_delete.connect(
                endpoint_recent_forget, sender=model, dispatch_uid=f"endpoint-recent-del-{model.__name__}"
            )
        setting_changed.connect(endpoint_recent_forget, dispatch_uid="endpoint-recent-settings")
