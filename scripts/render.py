"""Write one table as Markdown, LaTeX and CSV from the same cells.

A table is a list of rows; each cell is a :class:`Cell` (text plus optional bold/underline) or plain text.
Numbers are formatted once by the caller, so the three files always show the same digits.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable


@dataclass
class Cell:
    text: str
    bold: bool = False
    underline: bool = False
    sup: str = ""          # footnote marks, e.g. "1,2" (a row whose method deviates from its paper)

    def md(self) -> str:
        t = self.text.replace("|", "\\|")
        if self.bold:
            t = f"**{t}**"
        if self.underline:
            t = f"<u>{t}</u>"
        if self.sup:
            t = f"{t}<sup>{self.sup}</sup>"
        return t

    def tex(self) -> str:
        t = latex_escape(self.text)
        if self.bold:
            t = f"\\textbf{{{t}}}"
        if self.underline:
            t = f"\\underline{{{t}}}"
        if self.sup:
            t = f"{t}$^{{{self.sup}}}$"
        return t


def as_cell(x: Any) -> Cell:
    return x if isinstance(x, Cell) else Cell("" if x is None else str(x))


def latex_escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "±":
            out.append("$\\pm$")
        elif ch == "—":
            out.append("--")
        elif ch == "−":
            out.append("$-$")
        elif ch == "Δ":
            out.append("$\\Delta$")
        elif ch == "†":
            out.append("$^\\dagger$")
        elif ch == "↳":
            out.append("$\\hookrightarrow$")
        elif ch == "×":
            out.append("$\\times$")
        elif ch == "≥":
            out.append("$\\geq$")
        elif ch == "≠":
            out.append("$\\neq$")
        elif ch == "~":
            out.append("\\textasciitilde{}")
        elif ch == "\\":
            out.append("\\textbackslash{}")
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    label: str = ""
    rules_after: set[int] = field(default_factory=set)   # LaTeX \midrule after these row indices

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(self.columns) - 1)) + "|"]
        for row in self.rows:
            lines.append("| " + " | ".join(as_cell(c).md() for c in row) + " |")
        if self.notes:
            lines.append("")
            lines.extend(f"- {n}" for n in self.notes)
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        spec = "l" + "r" * (len(self.columns) - 1)
        lines = ["\\begin{table}[t]", "\\centering", "\\small",
                 f"\\caption{{{latex_escape(self.title)}}}"]
        if self.label:
            lines.append(f"\\label{{{self.label}}}")
        lines += [f"\\begin{{tabular}}{{{spec}}}", "\\toprule",
                  " & ".join(latex_escape(c) for c in self.columns) + " \\\\", "\\midrule"]
        for i, row in enumerate(self.rows):
            lines.append(" & ".join(as_cell(c).tex() for c in row) + " \\\\")
            if i in self.rules_after and i != len(self.rows) - 1:
                lines.append("\\midrule")
        lines += ["\\bottomrule", "\\end{tabular}"]
        if self.notes:
            lines.append("\\par\\smallskip\\footnotesize " + " \\\\ ".join(latex_escape(n) for n in self.notes))
        lines.append("\\end{table}")
        return "\n".join(lines) + "\n"


class Footnotes:
    """Numbered footnotes shared by a table's rows: the same text always gets the same number."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def marks(self, texts: list[str]) -> str:
        """"1,3" for ``texts`` (numbering new ones in order of appearance)."""
        nums = []
        for t in texts:
            if t not in self.texts:
                self.texts.append(t)
            nums.append(self.texts.index(t) + 1)
        return ",".join(str(n) for n in nums)

    def numbered(self, texts: list[str]) -> str:
        """"[1] text; [3] text" (the CSV form)."""
        self.marks(texts)
        return "; ".join(f"[{self.texts.index(t) + 1}] {t}" for t in texts)

    def notes(self) -> list[str]:
        return [f"{i}. {t}" for i, t in enumerate(self.texts, 1)]


def write_csv(path: Path, records: Iterable[dict[str, Any]], fields: list[str]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue(), encoding="utf-8")


def write_tables(out_base: Path, tables: list[Table], header: str = "") -> tuple[Path, Path]:
    """``out_base``.md and ``out_base``.tex holding every table (CSV is written by the caller)."""
    out_base.parent.mkdir(parents=True, exist_ok=True)
    md = out_base.with_suffix(".md")
    tex = out_base.with_suffix(".tex")
    md.write_text((header + "\n" if header else "") + "\n".join(t.to_markdown() for t in tables), encoding="utf-8")
    tex.write_text("% generated from results/ by scripts/; do not edit. Needs \\usepackage{booktabs}\n" + "\n".join(t.to_latex() for t in tables),
                   encoding="utf-8")
    return md, tex


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "—"
    return f"{x:.{digits}f}".replace("-", "−")


def fmt_pm(mean: float | None, std: float | None, digits: int = 1) -> str:
    if mean is None:
        return "—"
    return fmt(mean, digits) if std is None else f"{fmt(mean, digits)} ± {std:.{digits}f}"
