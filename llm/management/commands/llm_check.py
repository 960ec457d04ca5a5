from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from llm.checks import endpoint_check, endpoints_to_check


class Command(BaseCommand):
    help = (
        "Send one tiny request per configured LLM endpoint (a role's endpoint record, or its environment variables); "
        "report reachability, model, structured outputs, latency."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--role", choices=sorted(settings.LLM_ROLES), help="check only this role's endpoint")
        parser.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args, **options) -> None:
        endpoints = endpoints_to_check(options["role"])
        if not endpoints:
            which = f"role {options['role']!r}" if options["role"] else "any role"
            raise CommandError(
                f"No LLM endpoint is configured for {which}. Assign an endpoint record to the role on the LLM "
                "endpoint records page, or set LLM_BASE_URL and LLM_MODEL (and LLM_API_KEY), "
                "or the role's own variables such as JUDGE_BASE_URL / JUDGE_MODEL."
            )
        failed = []
        for endpoint, roles in endpoints.values():
            check = endpoint_check(endpoint, roles, timeout=options["timeout"])
            if check.reachable:
                self.stdout.write(
                    f"OK    {check.base_url}  model={check.model} (served as {check.served_model or '?'})  "
                    f"{check.describe_capabilities()}  latency: {check.latency_ms} ms  roles: {', '.join(roles)}"
                )
            else:
                failed.append(check)
                self.stdout.write(
                    f"FAIL  {check.base_url}  model={check.model}  {check.error}  roles: {', '.join(roles)}"
                )
        if failed:
            raise CommandError(f"{len(failed)} of {len(endpoints)} endpoint(s) did not answer")
