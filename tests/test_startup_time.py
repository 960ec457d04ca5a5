"""Processes start quickly (issue 29): importing the URL configuration, which every web and
worker process and many commands do, and ``manage.py help`` load none of the heavy libraries,
which are imported where they are used; and each stays within a wall-time budget measured in
a fresh subprocess. Quiet figures on the 2-core machine: 1.5 s for the URLs, 1.0 s for help
(docs/testing.md); the budgets are 4 times that, so they hold on a machine that is loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

#: Libraries that cost a second or more to import between them; none belongs on a start path.
HEAVY = ("scipy", "sklearn", "nltk", "plotly", "pandas", "pyarrow", "torch", "transformers", "sentence_transformers")

_PROBE = """
import atexit, json, sys, runpy
heavy = {heavy!r}
atexit.register(lambda: print("LOADED=" + json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr))
{body}
"""


def _run(body: str) -> tuple[float, list[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env["DJANGO_SETTINGS_MODULE"] = "config.django.base"
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY, body=body)],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stderr.rsplit("LOADED=", 1)[1].splitlines()[0])
    return seconds, loaded, out.stdout


def test_the_url_configuration_loads_no_heavy_library_and_starts_within_its_budget():
    seconds, loaded, _ = _run("import django; django.setup(); import config.urls")
    assert loaded == [], f"imported at start: {loaded}; import them inside the functions that use them"
    assert seconds < 6.0, f"config.urls took {seconds:.1f} s (quiet: 1.5 s)"


def test_manage_py_help_loads_no_heavy_library_and_starts_within_its_budget():
    seconds, loaded, stdout = _run("sys.argv = ['manage.py', 'help']; runpy.run_path('manage.py', run_name='__main__')")
    assert "Available subcommands" in stdout
    assert loaded == [], f"imported by manage.py help: {loaded}"
    assert seconds < 4.0, f"manage.py help took {seconds:.1f} s (quiet: 1.0 s)"


def test_a_heavy_library_on_the_start_path_is_seen():
    """The probe itself: a start that does import one of them is reported."""
    _, loaded, _ = _run("import django; django.setup(); import config.urls; import plotly.graph_objects")
    assert loaded == ["plotly"]
