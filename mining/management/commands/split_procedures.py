from django.core.management.base import BaseCommand, CommandError

from mining.constants import BENCH_PER_TOPIC, DEDUP_TAU
from mining.embeddings import EmbeddingModelUnavailable
from mining.split_services import procedure_split


class Command(BaseCommand):
    help = (
        "Split all procedures into How2Bench (N per topic, seeded) and How2Train (the rest), dropping "
        "benchmark candidates whose nearest other procedure has a cosine above tau (How2Everything App. E.1)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--per-topic",
            type=int,
            default=BENCH_PER_TOPIC,
            help=f"benchmark size per topic (default: {BENCH_PER_TOPIC})",
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of the per-topic sampling (default: 0)")
        parser.add_argument("--tau", type=float, default=DEDUP_TAU, help=f"cosine threshold (default: {DEDUP_TAU})")
        parser.add_argument(
            "--embedding-model",
            help="model name or folder (default: the EMBEDDING_MODEL setting, else all-MiniLM-L6-v2)",
        )
        parser.add_argument(
            "--report", help="write the similarity report here (default: VAR_DIR/splits/split-<id>.json)"
        )

    def handle(self, *args, **options) -> None:
        try:
            report = procedure_split(
                per_topic=options["per_topic"],
                seed=options["seed"],
                tau=options["tau"],
                embedding_model=options["embedding_model"],
                report_path=options["report"],
            )
        except (ValueError, EmbeddingModelUnavailable) as exc:
            raise CommandError(f"{exc}\nNo split was changed.") from exc
        self.stdout.write(
            f"split {report.pk} with {report.embedding_model} (tau {report.tau}, seed {report.seed}): "
            f"{report.n_bench} How2Bench, {report.n_train} How2Train of {report.n_procedures} procedures"
        )
        for row in report.topics:
            note = " (ran out of candidates)" if row["ran_out"] else ""
            self.stdout.write(
                f"  {row['topic']}: {row['bench']} bench of {row['procedures']}, {row['dropped']} candidates dropped{note}"
            )
        self.stdout.write(f"report: {report.report_file}")
