"""Plotly figures for the judging pages (HTML fragments drawn by static/js/charts.js: core/charts.py)."""

from __future__ import annotations

from typing import Any

from core.charts import figure_html


def how2score_bars(rows: list[dict[str, Any]]) -> str:
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    # Pages show How2Score on 0-100: the rows' _percent forms.
    scored = [r for r in rows if r["how2score_percent"] is not None]
    # Error bars: each row's 95 % Wilson interval; incomplete rows (below the coverage threshold) in grey.
    figure = go.Figure(
        go.Bar(
            x=[r["label"] for r in scored],
            y=[r["how2score_percent"] for r in scored],
            text=[f"{r['how2score_percent']:.1f}" for r in scored],
            textposition="outside",
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [r["ci95_percent"][1] - r["how2score_percent"] for r in scored],
                "arrayminus": [r["how2score_percent"] - r["ci95_percent"][0] for r in scored],
            },
            marker_color=["#2d5bd7" if r.get("complete", True) else "#98a2b3" for r in scored],
            customdata=[
                [
                    r["n_judged"],
                    r["metrics"]["avg_gen_tokens"] or 0,
                    r["ci95_percent"][0],
                    r["ci95_percent"][1],
                    100 * (r["coverage"] or 0),
                ]
                for r in scored
            ],
            hovertemplate=(
                "%{x}<br>How2Score %{y:.1f} [%{customdata[2]:.1f}, %{customdata[3]:.1f}] over %{customdata[0]} "
                "judged<br>coverage %{customdata[4]:.0f}%<br>%{customdata[1]:.1f} generated tokens<extra></extra>"
            ),
        )
    )
    figure.update_layout(
        height=360, margin={"l": 40, "r": 10, "t": 20, "b": 80}, yaxis_title="How2Score", yaxis_range=[0, 105]
    )
    return figure_html(figure, div_id="how2score-bars", config={"displaylogo": False})


def topic_heatmap(rows: list[dict[str, Any]]) -> str:
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    topics = sorted({t for r in rows for t in r["by_topic"]})
    z = [[r["by_topic"].get(t, {}).get("how2score_percent") for t in topics] for r in rows]

    def cell(row: dict[str, Any], topic: str) -> list[Any]:
        score = row["by_topic"].get(topic) or {}
        ci = score.get("ci95_percent") or [None, None]
        return [score.get("n_scored", 0), ci[0], ci[1]]

    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=topics,
            y=[r["label"] for r in rows],
            colorscale="RdYlGn",
            zmin=0,
            zmax=100,
            customdata=[[cell(r, t) for t in topics] for r in rows],
            hovertemplate=(
                "%{y}<br>%{x}<br>How2Score %{z:.1f} [%{customdata[1]:.1f}, %{customdata[2]:.1f}] "
                "over %{customdata[0]} judged<extra></extra>"
            ),
            colorbar={"title": "How2Score"},
        )
    )
    figure.update_layout(height=120 + 40 * max(1, len(rows)), margin={"l": 140, "r": 10, "t": 20, "b": 140})
    return figure_html(figure, div_id="topic-heatmap", config={"displaylogo": False})
