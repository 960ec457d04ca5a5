"""Celery: a broker that needs no server by default, Redis or RabbitMQ when CELERY_BROKER_URL says so."""

from pathlib import Path

from config.env import env_int, env_str, var_dir


def _default_result_backend(broker_url: str, local: Path) -> str:
    if broker_url.startswith(("redis://", "rediss://")):
        return broker_url
    if broker_url.startswith(("amqp://", "amqps://", "pyamqp://")):
        return "rpc://"
    return f"file://{local / 'celery' / 'results'}"


#: The kinds of work a worker can be given, by the queue each goes to (CELERY_QUEUE_<KIND>,
#: default the one queue ``celery`` that every worker consumes unless told otherwise). A
#: cluster gives each kind its own workers (docs/operations.md, "Several machines").
TASK_KINDS: dict[str, tuple[str, ...]] = {
    # Reading an uploaded file: the worker must see VAR_DIR/uploads of the web server.
    "IMPORTS": ("mining.corpus_import_run", "annotate.study_import_run"),
    # Runs that ask LLM endpoints: any machine with the database, the broker and the cache.
    "RUNS": (
        "llm.job_execute",
        "mining.run_execute",
        "judging.generation_run_execute",
        "judging.judge_run_execute",
        "judging.components_run_execute",
        "goalstep.task_evaluation_execute",
        "coscript.run_execute",
    ),
    # Prolific's periodic sync (celery beat), the syncs it fans out, and stopping a study on
    # Prolific once its interval reached the target width (docs/allocation.md).
    "PROLIFIC": ("prolific.sync_all", "prolific.sync_study", "prolific.stop_for_target"),
}
DEFAULT_QUEUE = "celery"


def task_queues() -> dict[str, str]:
    """The queue of each kind of work, from CELERY_QUEUE_IMPORTS / _RUNS / _PROLIFIC."""
    return {kind: env_str(f"CELERY_QUEUE_{kind}", DEFAULT_QUEUE) or DEFAULT_QUEUE for kind in TASK_KINDS}


def task_routes(queues: dict[str, str]) -> dict[str, dict[str, str]]:
    """Celery's task_routes: each task name to its kind's queue."""
    return {task: {"queue": queues[kind]} for kind, tasks in TASK_KINDS.items() for task in tasks}


def celery_settings() -> dict:
    local = var_dir()
    broker_url = env_str("CELERY_BROKER_URL", "filesystem://") or "filesystem://"
    queues = task_queues()
    settings = {
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_DEFAULT_QUEUE": DEFAULT_QUEUE,
        "CELERY_TASK_ROUTES": task_routes(queues),
        "TASK_QUEUES": queues,
        "CELERY_RESULT_BACKEND": env_str("CELERY_RESULT_BACKEND") or _default_result_backend(broker_url, local),
        "CELERY_TASK_ACKS_LATE": True,  # a killed worker's task is redelivered, not lost
        "CELERY_WORKER_PREFETCH_MULTIPLIER": 1,
        "CELERY_TASK_TRACK_STARTED": True,
        "CELERY_RESULT_EXPIRES": env_int("CELERY_RESULT_EXPIRES", 24 * 3600),
        "CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP": True,
        "CELERY_BROKER_TRANSPORT_OPTIONS": {},
    }
    if broker_url.startswith(("redis://", "rediss://", "sqs://")):
        # A task not acknowledged within this time is delivered again. It is far longer than
        # an LLM job's claim (LLM_JOB_LEASE_SECONDS, renewed every second while the job
        # runs), so a redelivered task finds a live job claimed and leaves it alone, and a
        # killed worker's job (its claim long expired) is taken over.
        settings["CELERY_BROKER_TRANSPORT_OPTIONS"] = {
            "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 4 * 3600)
        }
    if broker_url.startswith("filesystem://"):
        queue = local / "celery" / "queue"
        processed = local / "celery" / "processed"
        for folder in (queue, processed, local / "celery" / "results", local / "celery" / "control"):
            folder.mkdir(parents=True, exist_ok=True)
        settings["CELERY_BROKER_TRANSPORT_OPTIONS"] = {
            "data_folder_in": str(queue),
            "data_folder_out": str(queue),
            "processed_folder": str(processed),
            "store_processed": False,
            # Broadcast/control messages (worker pings, remote control) stay under var/ too.
            "control_folder": str(local / "celery" / "control"),
        }
    return settings
