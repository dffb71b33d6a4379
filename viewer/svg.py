"""Inline SVG drawn in Python: a DAG in layers and a confidence curve.

Drawn server-side so the page needs no JavaScript graph library and the static export opens offline.
"""
from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

COLOURS = {"done": "#d9f2d9", "superseded": "#eee", "failed": "#f8d0d0", "pruned": "#eee", "pending": "#fff6cc"}


def dag(nodes: list[dict[str, Any]], *, width: int = 150, height: int = 44) -> Markup:
    """``nodes``: ``{id, label, inputs, status}``; layered by longest path from the sources, inputs missing
    from ``nodes`` are drawn as source boxes so no edge is lost."""
    by_id = {n["id"]: n for n in nodes}
    for n in list(nodes):
        for i in n.get("inputs") or []:
            if i not in by_id:
                by_id[i] = {"id": i, "label": i, "inputs": [], "status": "input"}
    depth: dict[str, int] = {}

    def level(nid: str, seen: frozenset[str] = frozenset()) -> int:
        if nid in depth:
            return depth[nid]
        if nid in seen:  # a cycle (a rejected plan): stop, the check's error names it
            return 0
        ins = [i for i in by_id[nid].get("inputs") or [] if i in by_id]
        depth[nid] = 0 if not ins else 1 + max(level(i, seen | {nid}) for i in ins)
        return depth[nid]

    for nid in by_id:
        level(nid)
    columns: dict[int, list[str]] = {}
    for nid in by_id:
        columns.setdefault(depth[nid], []).append(nid)
    gap_x, gap_y = 60, 18
    pos = {nid: (10 + d * (width + gap_x), 10 + r * (height + gap_y))
           for d, ids in columns.items() for r, nid in enumerate(ids)}
    w = 20 + (max(columns) + 1) * (width + gap_x) - gap_x if columns else 40
    h = 20 + max((len(v) for v in columns.values()), default=1) * (height + gap_y) - gap_y
    parts = [f'<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
             ('<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
              '<path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>')]
    for nid, n in by_id.items():
        x2, y2 = pos[nid]
        for i in n.get("inputs") or []:
            if i in pos:
                x1, y1 = pos[i]
                parts.append(f'<line x1="{x1 + width}" y1="{y1 + height / 2}" x2="{x2}" y2="{y2 + height / 2}" '
                             'stroke="#555" marker-end="url(#arr)"/>')
    for nid, n in by_id.items():
        x, y = pos[nid]
        fill = COLOURS.get(str(n.get("status")), "#e8f0fe")
        dash = ' stroke-dasharray="4 3"' if n.get("status") in ("superseded", "pruned", "input") else ""
        label = str(n.get("label") or nid)
        parts.append(f'<g class="node" data-id="{escape(nid)}"><title>{escape(n.get("title") or label)}</title>'
                     f'<rect x="{x}" y="{y}" width="{width}" height="{height}" rx="6" fill="{fill}" '
                     f'stroke="#333"{dash}/>'
                     f'<text x="{x + 6}" y="{y + 17}" font-size="12" font-weight="bold">{escape(nid[:22])}</text>'
                     f'<text x="{x + 6}" y="{y + 34}" font-size="11">{escape(label[:24])}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))


def curve(points: list[tuple[float | None, float | None, bool]], *, tau: float | None = None, w: int = 560,
          h: int = 160) -> Markup:
    """Confidence per step: ``(System 1 confidence, final confidence, System 2 fired)``. The final confidence is
    the solid line, System 1's the dashed grey one (a red stroke joins them where System 2 fired: where the
    confidence dropped and what reflection made of it); a dashed red line is the threshold ``tau``. A step
    without a confidence is a gap marked with a grey tick, never drawn as 0."""
    if not points:
        return Markup("")
    pad = 28
    step = (w - 2 * pad) / max(1, len(points) - 1)

    def xy(i: int, c: float) -> tuple[float, float]:
        return pad + i * step, h - pad - c * (h - 2 * pad)

    def lines(values: list[float | None], style: str) -> list[str]:
        out, seg = [], []
        for i, c in enumerate(values + [None]):
            if c is None:
                if len(seg) > 1:
                    out.append(f'<polyline fill="none" {style} points="{" ".join(seg)}"/>')
                seg = []
            else:
                x, y = xy(i, c)
                seg.append(f"{x:.1f},{y:.1f}")
        return out

    parts = [f'<svg class="curve" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#999"/>',
             f'<text x="2" y="{pad + 4}" font-size="10">1.0</text>',
             f'<text x="2" y="{h - pad + 4}" font-size="10">0.0</text>']
    if tau is not None:
        _, ty = xy(0, tau)
        parts.append(f'<line x1="{pad}" y1="{ty}" x2="{w - pad}" y2="{ty}" stroke="#c00" stroke-dasharray="5 4"/>'
                     f'<text x="{w - pad - 40}" y="{ty - 4}" font-size="10" fill="#c00">τ={tau}</text>')
    parts += lines([p[0] for p in points], 'stroke="#999" stroke-dasharray="3 3"')
    parts += lines([p[1] for p in points], 'stroke="#1f5fbf"')
    for i, (c1, c, s2) in enumerate(points):
        x, _ = xy(i, 0)
        parts.append(f'<text x="{x - 3:.1f}" y="{h - pad + 14}" font-size="10">{i + 1}</text>')
        if c is None:
            parts.append(f'<line x1="{x}" y1="{h - pad - 6}" x2="{x}" y2="{h - pad + 6}" stroke="#999"/>')
            continue
        _, y = xy(i, c)
        if s2 and c1 is not None:
            _, y1 = xy(i, c1)
            parts.append(f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y:.1f}" stroke="#d33" stroke-width="2"/>'
                         f'<circle cx="{x:.1f}" cy="{y1:.1f}" r="3" fill="#fff" stroke="#d33"/>')
        first = "" if c1 is None or not s2 else f"System 1 {c1:.2f}, "
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if s2 else 3}" fill="{"#d33" if s2 else "#1f5fbf"}">'
                     f'<title>step {i + 1}: {first}final {c:.2f}{" (System 2 fired)" if s2 else ""}</title></circle>')
    parts.append("</svg>")
    return Markup("".join(parts))
