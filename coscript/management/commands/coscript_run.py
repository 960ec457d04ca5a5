"""Constrained planning runs from the command line (CoScript, Yuan et al. 2023): start one,
watch it, filter it again, export it for annotation, add it to the benchmark."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from core.record_files import RecordError
from core.run_configs import config_read
from coscript.constants import DEFAULT_FILTER_MODE, DEFAULT_K, FILTER_MODES, KEYWORD_BONUS, MAX_K
from coscript.models import CoScriptRun
from coscript.phase_services import coscript_run_execute, coscript_run_filter
from coscript.result_services import EXPORT_CHOICES, coscript_add_to_benchmark, coscript_export
from coscript.run_launch import coscript_config_launch, coscript_launch
from coscript.run_services import coscript_run_retry_failed
from coscript.selectors import coscript_filter_report, coscript_report, coscript_run_state
from judging.models import PromptStyle
from llm.constants import EXECUTORS
from llm.costs import cost_json, job_costs
from llm.endpoints import EndpointNotConfigured
from llm.prompts import PromptError
from llm.run_commands import run_finished_line, runs_done_check
from llm.runs import run_state_json
from mining.embeddings import EmbeddingModelUnavailable


def _decimal(value: str) -> Decimal:
    try:
        return Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"not a number: {value!r}") from exc


class Command(BaseCommand):
    help = (
        "coscript_run start --name N --model M [...] [--wait] | status N | retry N [--wait] | filter N --mode MODE | "
        "export N --output FILE.jsonl [--candidates selected|kept|all] | add-to-benchmark N"
    )

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="derive specific goals, over-generate scripts and filter them")
        start.add_argument(
            "--config",
            help="a YAML file with the same settings (name, model, split, limit, seed, k, "
            "filter_mode, keyword_bonus, screen, embedding_model, executor, "
            "concurrency, budget_usd, prompts_dir), as the API takes it",
        )
        start.add_argument("--name")
        start.add_argument("--model", help="a registered language model's name")
        start.add_argument("--base-url", help="register or update --model with this endpoint")
        start.add_argument("--model-id", help="register or update --model with this model id at the endpoint")
        start.add_argument("--api-key-env", help="environment variable with the endpoint's API key")
        start.add_argument("--prompt-style", choices=PromptStyle.values, help="chat (inst) or completion (base)")
        start.add_argument("--split", default="", help="take abstract goals from this split (default: every procedure)")
        start.add_argument("--limit", type=int, help="draw this many abstract goals (seeded; default: all)")
        start.add_argument("--seed", type=int, default=0)
        start.add_argument(
            "--k",
            type=int,
            default=DEFAULT_K,
            help=f"candidate scripts per specific goal, 1-{MAX_K} (default {DEFAULT_K}, Table 11)",
        )
        start.add_argument("--filter", dest="filter_mode", choices=FILTER_MODES, default=DEFAULT_FILTER_MODE)
        start.add_argument(
            "--keyword-bonus",
            type=float,
            default=KEYWORD_BONUS,
            help=f"added to the target goal's similarity per share of constraint keywords (default {KEYWORD_BONUS})",
        )
        start.add_argument("--no-screen", action="store_true", help="skip the sensitive-domain screen (Table 12)")
        start.add_argument("--embedding-model", help="model name or folder (default: the EMBEDDING_MODEL setting)")
        start.add_argument("--executor", choices=EXECUTORS, default="online")
        start.add_argument("--concurrency", type=int, default=16)
        start.add_argument("--budget-usd", type=_decimal)
        start.add_argument("--prompts-dir", help="a folder with replacement prompt files of the same names")
        start.add_argument(
            "--wait",
            action="store_true",
            help="run in this process until done instead of handing it to a Celery worker",
        )
        status = sub.add_parser(
            "status", help="print a run's state (status, requests per outcome, top errors), phase and report as JSON"
        )
        status.add_argument("name")
        retry = sub.add_parser(
            "retry",
            help="Retry failed: a run stopped at a phase asks exactly that phase's "
            "requests without an ok answer again, then goes on",
        )
        retry.add_argument("name")
        retry.add_argument(
            "--wait",
            action="store_true",
            help="run in this process until done instead of handing it to a Celery worker",
        )
        refilter = sub.add_parser("filter", help="apply the filter again with another mode or keyword bonus")
        refilter.add_argument("name")
        refilter.add_argument("--mode", choices=FILTER_MODES)
        refilter.add_argument("--keyword-bonus", type=float)
        refilter.add_argument("--embedding-model")
        export = sub.add_parser("export", help="write the constraint-faithfulness study's input lines")
        export.add_argument("name")
        export.add_argument("--output", required=True, help="JSONL file (.gz/.zst/.bz2/.xz compress it)")
        export.add_argument(
            "--candidates",
            choices=EXPORT_CHOICES,
            default="selected",
            help="each goal's chosen script (default), every kept candidate, or every candidate",
        )
        add = sub.add_parser("add-to-benchmark", help="add the chosen scripts as procedures of the constrained split")
        add.add_argument("name")

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, "_" + options["action"].replace("-", "_"))(options)
        except (ValueError, PromptError, EndpointNotConfigured, EmbeddingModelUnavailable, RecordError) as exc:
            raise CommandError(str(exc)) from exc

    @staticmethod
    def _run(name: str) -> CoScriptRun:
        run = CoScriptRun.objects.select_related("language_model").filter(name=name).first()
        if run is None:
            raise CommandError(f"no CoScript run named {name!r}")
        return run

    def _start(self, options) -> None:
        if options["config"]:
            run = coscript_launch(
                config_text=config_read(options["config"]), source=options["config"], start=not options["wait"]
            )
        else:
            if not options["name"] or not options["model"]:
                raise CommandError("give --config FILE.yaml, or --name and --model")
            model = {
                "name": options["model"],
                **{
                    ("model" if k == "model_id" else k): options[k]
                    for k in ("base_url", "model_id", "api_key_env", "prompt_style")
                    if options[k]
                },
            }
            config = {
                "name": options["name"],
                "model": model,
                "split": options["split"],
                "limit": options["limit"],
                "seed": options["seed"],
                "k": options["k"],
                "filter_mode": options["filter_mode"],
                "keyword_bonus": options["keyword_bonus"],
                "screen": not options["no_screen"],
                "embedding_model": options["embedding_model"],
                "executor": options["executor"],
                "concurrency": options["concurrency"],
                "budget_usd": options["budget_usd"],
                "prompts_dir": options["prompts_dir"],
            }
            run = coscript_config_launch(config=config, source="coscript_run start", start=not options["wait"])
        self.stdout.write(
            f"CoScript run {run.name!r} (id {run.pk}): {len(run.abstract_ids)} abstract goals, "
            f"{len(run.abstract_ids) * 3} specific-goal requests"
        )
        if options["wait"]:
            coscript_run_execute(run_id=run.pk)
            finished = self._finished(run)
            self._print_filter(run)
            runs_done_check([finished])

    def _status(self, options) -> None:
        run = self._run(options["name"])
        costs = job_costs(job for _, job in run.jobs)
        jobs = {
            phase: None
            if job is None
            else {
                "status": job.status,
                "requests": job.n_total,
                "done": job.n_done,
                "outcomes": job.outcome_counts,
                # null when unknown: a request without a price (llm/costs.py)
                "cost_usd": cost_json(costs[job.pk]),
                "requests_without_price": costs[job.pk]["n_unpriced"],
            }
            for phase, job in run.jobs
        }
        self.stdout.write(
            json.dumps(
                {
                    "name": run.name,
                    **run_state_json(coscript_run_state(run)),
                    "phase": run.phase,
                    "pause_reason": run.pause_reason,
                    "error": run.error,
                    "jobs": jobs,
                    "report": coscript_report(run),
                },
                indent=2,
            )
        )

    def _retry(self, options) -> None:
        run = self._run(options["name"])
        n = coscript_run_retry_failed(run=run, enqueue=not options["wait"])
        self.stdout.write(f"{run.name}: {n} failed request(s) to ask again")
        if not options["wait"]:
            self._status(options)
            return
        coscript_run_execute(run_id=run.pk)
        finished = self._finished(run)
        self._status(options)
        runs_done_check([finished])

    def _finished(self, run: CoScriptRun) -> tuple[str, dict]:
        """Print the run's true state once it has stopped (docs/commands.md, "Waiting for a
        run"); returns it for ``runs_done_check``."""
        run.refresh_from_db()
        state = coscript_run_state(run)
        self.stdout.write(run_finished_line(state))
        return f"CoScript run {run.name!r}", state

    def _filter(self, options) -> None:
        run = self._run(options["name"])
        if options["embedding_model"]:
            run.embedding_model = options["embedding_model"]
        coscript_run_filter(run=run, mode=options["mode"], keyword_bonus=options["keyword_bonus"])
        self._print_filter(run)

    def _export(self, options) -> None:
        run = self._run(options["name"])
        n = coscript_export(run=run, output=options["output"], candidates=options["candidates"])
        self.stdout.write(f"{n} lines -> {options['output']}")

    def _add_to_benchmark(self, options) -> None:
        counts = coscript_add_to_benchmark(run=self._run(options["name"]))
        self.stdout.write(
            ", ".join(f"{name.replace('_', ' ')}: {n}" for name, n in sorted(counts.items()))
            or "no chosen scripts to add"
        )

    def _print_filter(self, run: CoScriptRun) -> None:
        report = coscript_filter_report(run)
        if not report:
            self.stdout.write(f"phase {run.phase}, status {run.status}")
            return
        self.stdout.write(f"filter {report['mode']} (keyword bonus {report['keyword_bonus']}):")
        for name, row in [*report["by_type"].items(), ("total", report["total"])]:
            rate = (
                "—"
                if row["kept_rate"] is None
                else (
                    f"{row['kept_rate']:.3f}, 95% Wilson {row['kept_rate_ci95'][0]:.3f}–{row['kept_rate_ci95'][1]:.3f}"
                )
            )
            self.stdout.write(
                f"  {name}: kept {row['kept']} / {row['candidates']} candidates ({rate}); "
                f"{row['goals_with_script']} / {row['goals']} specific goals have a script"
            )
