"""Plotly figures for mining pages (HTML fragments drawn by static/js/charts.js: core/charts.py)."""

from __future__ import annotations

from core.charts import figure_html
from mining.models import Split

_SPLIT_COLOURS = {
    Split.BENCH.value: "#1f77b4",
    Split.TRAIN.value: "#2ca02c",
    Split.NONE.value: "#9e9e9e",
    Split.CONSTRAINED.value: "#ff7f0e",
}


def procedures_per_topic_chart(rows: list[dict]) -> str:
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    topics = [row["topic"] for row in rows]
    figure = go.Figure()
    for split in Split:
        figure.add_bar(
            name=split.label,
            x=topics,
            y=[row[split.value] for row in rows],
            marker_color=_SPLIT_COLOURS[split.value],
        )
    figure.update_layout(
        barmode="stack",
        height=420,
        margin={"l": 40, "r": 10, "t": 30, "b": 140},
        yaxis_title="procedures",
        legend_orientation="h",
        legend_y=1.1,
    )
    return figure_html(figure, div_id="procedures-per-topic", config={"displaylogo": False})


def documents_per_topic_chart(rows: list[dict]) -> str:
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    figure = go.Figure()
    figure.add_bar(x=[row["topic"] for row in rows], y=[row["documents"] for row in rows], marker_color="#1f77b4")
    figure.update_layout(height=380, margin={"l": 50, "r": 10, "t": 20, "b": 140}, yaxis_title="documents")
    return figure_html(figure, div_id="documents-per-topic", config={"displaylogo": False})


def mining_funnel_chart(funnel: list[dict], documents: int) -> str:
    """How2Everything Figure 2: documents left after each stage. Documents still being
    worked on are drawn apart, as in flight, so only rejections and failures narrow it.
    Counts only: the shares (yield, pass rates) are in the page's tables with their n and
    intervals."""
    import plotly.graph_objects as go  # heavy: imported when a chart is drawn

    labels = ["documents"] + [row["stage"] for row in funnel]
    passed = [documents] + [row["passed"] for row in funnel]
    in_flight = [0] + [row["in_flight"] for row in funnel]
    figure = go.Figure()
    figure.add_funnel(name="passed", y=labels, x=passed, textinfo="value", marker_color="#1f77b4")
    if any(in_flight):
        figure.add_funnel(name="in flight", y=labels, x=in_flight, textinfo="value", marker_color="#c6dbef")
    figure.update_layout(
        height=360,
        margin={"l": 130, "r": 10, "t": 10, "b": 20},
        funnelmode="stack",
        legend_orientation="h",
        legend_y=-0.05,
    )
    return figure_html(figure, div_id="mining-funnel", config={"displaylogo": False})
