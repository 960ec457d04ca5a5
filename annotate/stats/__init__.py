"""The agreement statistics, pure: no Django import here or below, so scripts, commands and
trainers use them without settings. ``records`` (JSONL readers), ``majority`` (labels and the
human majority), ``bootstrap`` (seeds, resamples, shares), ``alpha``, ``kappa``,
``calibration``, ``agreement`` (the agreement report), ``signals``, ``ranking`` and
``metric_agreement`` (which automatic metric agrees with people)."""
