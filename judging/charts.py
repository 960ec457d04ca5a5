"""Plotly figures for the judging pages (HTML fragments)."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go


def how2score_bars(rows: list[dict[str, Any]]) -> str:
    scored = [r for r in rows if r["how2score"] is not None]
    figure = go.Figure(go.Bar(
        x=[r["label"] for r in scored], y=[r["how2score"] for r in scored],
        text=[f"{r['how2score']:.1f}" for r in scored], textposition="outside",
        customdata=[[r["n_scored"], r["metrics"]["avg_gen_tokens"] or 0] for r in scored],
        hovertemplate="%{x}<br>How2Score %{y:.1f} over %{customdata[0]} judged<br>%{customdata[1]:.1f} generated tokens<extra></extra>",
    ))
    figure.update_layout(height=360, margin={"l": 40, "r": 10, "t": 20, "b": 80}, yaxis_title="How2Score", yaxis_range=[0, 105])
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id="how2score-bars", config={"displaylogo": False})


def topic_heatmap(rows: list[dict[str, Any]]) -> str:
    topics = sorted({t for r in rows for t in r["by_topic"]})
    z = [[r["by_topic"].get(t, {}).get("how2score") for t in topics] for r in rows]
    figure = go.Figure(go.Heatmap(
        z=z, x=topics, y=[r["label"] for r in rows], colorscale="RdYlGn", zmin=0, zmax=100,
        hovertemplate="%{y}<br>%{x}<br>How2Score %{z:.1f}<extra></extra>", colorbar={"title": "How2Score"},
    ))
    figure.update_layout(height=120 + 40 * max(1, len(rows)), margin={"l": 140, "r": 10, "t": 20, "b": 140})
    return figure.to_html(full_html=False, include_plotlyjs=False, div_id="topic-heatmap", config={"displaylogo": False})
