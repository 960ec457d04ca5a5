"""Plotly figures of the agreement dashboards (HTML fragments drawn by static/js/charts.js: core/charts.py)."""

from __future__ import annotations

from typing import Any

from core.charts import figure_html

_CONFIG = {"displaylogo": False}


def _error_bars(values: list[float | None], intervals: list[list[float] | None], scale: float = 1.0) -> dict[str, Any]:
    """Plotly asymmetric error bars from 95 % intervals (none where a value or interval is missing)."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [None if (ci is None or v is None) else scale * (ci[1] - v) for v, ci in zip(values, intervals)],
        "arrayminus": [None if (ci is None or v is None) else scale * (v - ci[0]) for v, ci in zip(values, intervals)],
    }


HUMANS = "humans (leave-one-out)"


def leave_one_out_points(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The leave-one-out agreement of every annotator as points for the judges chart: one
    point per distinct (agreement, n), so annotators at the same point share it and are all
    named on it (``annotators``), each with its n and its 95 % Wilson interval (the report's
    ``leave_one_out``; annotators without an agreement are left out). Sorted by agreement."""
    groups: dict[tuple[float, int], dict[str, Any]] = {}
    for annotator, result in sorted(report["leave_one_out"].items()):
        if result["agreement"] is None:
            continue
        key = (result["agreement"], result["n"])
        point = groups.setdefault(
            key, {"agreement": result["agreement"], "n": result["n"], "ci95": result.get("ci95"), "annotators": []}
        )
        point["annotators"].append(annotator)
    return sorted(groups.values(), key=lambda p: (p["agreement"], p["n"], p["annotators"]))


def judge_agreement_bars(report: dict[str, Any]) -> str:
    """Judge vs human-majority agreement, overall and per class, with their 95 % Wilson
    intervals and n (How2Everything Figure 3), and beside them each annotator's leave-one-out
    agreement with the others' majority as a point with its own n and Wilson interval
    (``leave_one_out_points``; annotators at the same point are named together on it). Not a
    min–max band: a range across annotators each on a few items is not an interval. Empty
    when no judge could be compared with a human majority (nothing to draw)."""
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    judges = sorted(j for j, result in report["judges"].items() if result["n"])
    if not judges:
        return ""
    figure = go.Figure()
    for key, ci_key, n_key, label in (
        ("agreement", "ci95", "n", "overall"),
        ("agreement_has_failure", "ci95_has_failure", "n_has_failure", "has_failure"),
        ("agreement_no_failure", "ci95_no_failure", "n_no_failure", "no_failure"),
    ):
        values = [report["judges"][j][key] for j in judges]
        intervals = [report["judges"][j].get(ci_key) for j in judges]
        figure.add_bar(
            name=label,
            x=judges,
            y=[None if v is None else 100 * v for v in values],
            error_y=_error_bars(values, intervals, 100.0),
            text=[
                "—" if v is None else f"{100 * v:.1f} (n={report['judges'][j][n_key]})" for j, v in zip(judges, values)
            ],
            textposition="outside",
        )
    points = leave_one_out_points(report)
    if points:
        values = [p["agreement"] for p in points]
        figure.add_scatter(
            name=HUMANS,
            x=[f"human: {', '.join(p['annotators'])}" for p in points],
            y=[100 * v for v in values],
            mode="markers+text",
            marker={"color": "#616161", "size": 9},
            error_y=_error_bars(values, [p["ci95"] for p in points], 100.0),
            text=[f"{100 * p['agreement']:.1f} (n={p['n']})" for p in points],
            textposition="middle right",
            customdata=[
                [
                    ", ".join(p["annotators"]),
                    p["n"],
                    *((100 * p["ci95"][0], 100 * p["ci95"][1]) if p["ci95"] else (None, None)),
                ]
                for p in points
            ],
            hovertemplate=(
                "%{customdata[0]}: %{y:.1f}% agree with the others' majority<br>n = %{customdata[1]} items, "
                "95% Wilson interval [%{customdata[2]:.1f}, %{customdata[3]:.1f}]<extra></extra>"
            ),
        )
    figure.update_layout(
        barmode="group",
        height=380,
        yaxis_title="% agreement with the human majority",
        yaxis_range=[0, 105],
        margin={"l": 50, "r": 10, "t": 30, "b": 60},
        legend_orientation="h",
    )
    return figure_html(figure, div_id="judge-agreement", config=_CONFIG)


def alpha_by_round(rounds: list[dict[str, Any]]) -> str:
    """Alpha of each kind per pilot round with 95 % intervals; empty when no round has a
    defined alpha (the page says why in words instead of drawing an empty axis)."""
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    if all(value is None for r in rounds for value in r["report"]["alpha"].values()):
        return ""
    figure = go.Figure()
    kinds = (
        ("binary", "binary"),
        ("first_failure_location", "first-failure location"),
        ("l2_step_sets_masi", "L2 step sets (MASI)"),
    )
    for key, label in kinds:
        values = [r["report"]["alpha"][key] for r in rounds]
        intervals = [r["report"].get("alpha_ci95", {}).get(key) for r in rounds]
        figure.add_bar(
            name=label,
            x=[f"round {r['study'].round}" for r in rounds],
            y=values,
            error_y=_error_bars(values, intervals),
        )
    figure.update_layout(
        barmode="group",
        height=340,
        yaxis_title="Krippendorff's alpha",
        margin={"l": 50, "r": 10, "t": 20, "b": 40},
        legend_orientation="h",
    )
    return figure_html(figure, div_id="alpha-rounds", config=_CONFIG)


def annotator_scatter(table: list[dict[str, Any]]) -> str:
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    points = [r for r in table if r["loo_agreement"] is not None and r["median_active_seconds"] is not None]
    figure = go.Figure(
        go.Scatter(
            x=[r["median_active_seconds"] for r in points],
            y=[100 * r["loo_agreement"] for r in points],
            mode="markers",
            text=[r["annotator"] for r in points],
            marker={
                "size": [6 + min(20, r["n_main"]) for r in points],
                "color": ["#b42318" if r["excluded"] else "#2d5bd7" for r in points],
            },
            hovertemplate="%{text}<br>%{y:.1f}% agree with the others<br>median %{x:.0f} s active<extra></extra>",
        )
    )
    figure.update_layout(
        height=340,
        xaxis_title="median active seconds per item",
        yaxis_title="% agreement with the others' majority",
        margin={"l": 50, "r": 10, "t": 20, "b": 50},
    )
    return figure_html(figure, div_id="annotator-scatter", config=_CONFIG)


def metric_agreement_chart(report: dict[str, Any]) -> str:
    """Each signal's AUC against the human majority (left) and Kendall's tau between the
    model rankings (right), with 95 % intervals, in the report's rank order (best on top);
    dashed lines at chance (AUC 0.5, tau 0)."""
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn
    from plotly.subplots import make_subplots

    signals = list(report["signals"])
    labels = [f"{s['rank']}. {s['label']}" for s in signals][::-1]
    figure = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=("AUC for the human majority's has_failure", "Kendall's tau of model rankings"),
    )
    for column, key, ci_key, colour in (
        (1, "auc", "auc_ci95", "#2d5bd7"),
        (2, "kendall_tau", "kendall_tau_ci95", "#b54708"),
    ):
        values = [s[key] for s in signals][::-1]
        intervals = [s[ci_key] for s in signals][::-1]
        figure.add_trace(
            go.Scatter(
                x=values,
                y=labels,
                mode="markers",
                marker={"size": 9, "color": colour},
                showlegend=False,
                error_x=_error_bars(values, intervals),
                hovertemplate="%{y}: %{x:.3f}<extra></extra>",
            ),
            row=1,
            col=column,
        )
    figure.add_vline(x=0.5, line_dash="dash", line_color="#9e9e9e", row=1, col=1)
    figure.add_vline(x=0.0, line_dash="dash", line_color="#9e9e9e", row=1, col=2)
    figure.update_xaxes(range=[0, 1.02], row=1, col=1)
    figure.update_xaxes(range=[-1.05, 1.05], row=1, col=2)
    figure.update_layout(height=120 + 28 * max(1, len(signals)), margin={"l": 10, "r": 10, "t": 40, "b": 30})
    figure.update_yaxes(automargin=True)
    return figure_html(figure, div_id="metric-agreement-chart", config=_CONFIG)
