"""DeepResearch Bench (Du et al. 2025): 100 research tasks (50 zh, 50 en), scored by RACE with a judge model.

RACE, as the benchmark's ``deepresearch_bench_race.py`` / ``utils/score_calculator.py`` define it (rules
read, no code copied; ``../shared/datasets/README.md`` summarises them): the ``judge`` role gets the
released merged score prompt (``evaluators/deepresearch_prompts/race_{en,zh}.txt``, by task language) with
the task, ``article_1`` = the method's report, ``article_2`` = the reference article, and the task's
criteria per dimension (criterion + explanation, weights removed, ``json.dumps(..., ensure_ascii=False,
indent=2)``). Its reply is read as the release reads it (:func:`parse_race_json`): JSON with the four
dimensions, each a list of ``{criterion, analysis, article_1_score, article_2_score}``; a reply with no
parsable JSON or a dimension missing is asked again, up to ``judge.max_attempts`` = 10 times in all
(the release's ``MAX_RETRIES = 10``; each a distinct sample). Per dimension (:func:`race_scores`): the
criterion-weighted mean of each article's scores (criterion text matched exactly, then case-insensitively,
then by substring; unmatched: the dimension's mean weight); an empty criterion is skipped; a dimension without a
usable criterion averages 0 for both, as in the release; total = Σ dim_mean × ``dimension_weight``.
The problem's score = target_total / (target_total + reference_total) (0.5 = as good as the reference);
each dimension likewise. The headline is their mean over tasks (the paper reports ×100).

Deviations from the release, each because the house rule forbids a failed measurement becoming a 0:
both totals 0 (0/0) is no score (the release writes 0): the reply is asked again, then the problem is an
error; a dimension whose ratio is 0/0 is left out of that dimension's mean (the release averages its 0);
a non-finite (NaN, infinite) or negative score makes the reply unusable: the release carries NaN into the
total and writes an overall 0, and a negative score (the prompt asks for 0-10) gives ratios outside [0, 1];
a reply that does not score the reference (a criterion without ``article_2_score``, or a dimension whose
last item has none, which makes the release zero that dimension's whole reference average) is unusable: the
release scores the reference 0 there, so the report wins the dimension outright (RACE 100 from a judge that
never read the reference; issue 29). A judge still unusable after the 10 attempts makes the problem an error
(``JudgeError``), never a 0. Each unusable reply is asked again and counted: the judge record's ``rejected``
names why (``unparsed``, ``no_score``, ``off_scale``, ``missing_reference``, ``reference_zeroed``), metrics.json's
``judge.reasks`` / ``judge.rejected`` sum them per run, Table 3 and the viewer show them.

Deviation (recorded in the config): the release first rewrites each article with an LLM "ArticleCleaner"
(``prompt/clean_prompt.py``); here the report is judged as the method wrote it (``clean_articles: false``).

The reference articles (``cleaned_data/reference.jsonl``, git blob ``2b0f0902…``) are not in
``../shared/datasets``: ``make data`` downloads them for users with internet; without them the loader
fails with one line. Search (the ``search`` tool, pluggable by ``search.backend``): ``bm25`` — a local
BM25 index (bm25s) over ``search.corpus`` (a JSONL of ``{id, title, text}``), for offline runs and tests;
``tavily`` — the Tavily web search API that EDR uses, when ``$TAVILY_API_KEY`` is set (a request that
fails is the tool call's error, never an empty result).
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import re
from functools import cached_property
from pathlib import Path
from typing import Any

from agentic_repro.evaluators.base import Benchmark, DataInfo
from agentic_repro.evaluators.data import DataMissingError, data_dir, read_jsonl, select
from agentic_repro.evaluators.partition import files_digest
from agentic_repro.harness.types import Problem, Score

PROMPTS = Path(__file__).resolve().parent / "deepresearch_prompts"
DIMENSIONS = ("comprehensiveness", "insight", "instruction_following", "readability")
#: 2: the release's extraction, missing-reference and empty-criterion rules; 3: off-scale unusable;
#: 4: a reply that does not score the reference (missing ``article_2_score``, last-item zeroing) unusable
RACE_VERSION = "4"


def criteria_for_prompt(criteria: dict[str, Any]) -> str:
    """The criteria list the judge reads: per dimension, criterion + explanation (weights removed)."""
    out = {dim: [{"criterion": c["criterion"], "explanation": c["explanation"]}
                 for c in items if isinstance(c, dict) and "criterion" in c and "explanation" in c]
           for dim, items in (criteria.get("criterions") or {}).items() if isinstance(items, list)}
    return json.dumps(out, ensure_ascii=False, indent=2)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None


def _balanced_object(text: str) -> str | None:
    """The object that opens at the first ``{`` and closes where the brace depth returns to 0 (braces
    inside strings counted too, as the release counts them)."""
    start = text.find("{")
    if start < 0:
        return None
    depth = 0
    for i, ch in enumerate(text[start:], start):
        depth += (ch == "{") - (ch == "}")
        if depth == 0:
            return text[start:i + 1]
    return None


def _keyword_fallback(text: str) -> dict[str, Any] | None:
    """The release's last resort for a reply no JSON parser reads: per dimension named in the text, the
    ``"criterion": "..."`` / ``"article_1_score": n`` / ``"article_2_score": n`` triples of its stretch of text
    (up to the next dimension's name), paired in order; None when no dimension yields a triple."""
    if not all(k in text for k in ("comprehensiveness", "article_1_score", "article_2_score")):
        return None
    out: dict[str, Any] = {}
    for dim in DIMENSIONS:
        if dim not in text:
            continue
        begin = next(i for i in (text.find(f'"{dim}"'), text.find(f"'{dim}'"), text.find(dim)) if i >= 0)
        stop = len(text)
        for other in DIMENSIONS:
            if other == dim:
                continue
            for pos in (text.find(f'"{other}"', begin), text.find(f"'{other}'", begin),
                        text.find(other, begin + len(dim))):
                if pos >= 0:
                    stop = min(stop, pos)
                    break
        part = text[begin:stop]
        crits = re.findall(r'"criterion"\s*:\s*"([^"]+)"', part)
        s1 = [float(x) for x in re.findall(r'"article_1_score"\s*:\s*(\d+\.?\d*)', part)]
        s2 = [float(x) for x in re.findall(r'"article_2_score"\s*:\s*(\d+\.?\d*)', part)]
        out[dim] = [{"criterion": c, "article_1_score": a, "article_2_score": b} for c, a, b in zip(crits, s1, s2)]
    return out if any(out.values()) else None


def parse_race_json(text: str) -> dict[str, Any] | None:
    """The judge's JSON, found as the release's ``utils/json_extractor.py`` looks for it; None (asked again)
    when nothing parses or a dimension is missing (the release's two retry conditions).

    In order: the whole reply (when it is braced); the first fenced ```json block; the whole reply; the
    object from the first ``{`` to its matching ``}``; the first ``{`` to the last ``}``; the keyword fallback (:func:`_keyword_fallback`).
    Strict ``json.loads`` each time (no repair: the release asks again). A dimension present with any value
    passes here (the release checks only that the four keys exist); one that is not a list is unscored."""
    if not isinstance(text, str):
        return None
    found: Any = None
    body = text.strip()
    candidates = [body if body.startswith("{") and body.endswith("}") else None]
    fence = text.find("```json")
    if fence >= 0:
        close = text.find("```", fence + 7)
        candidates.append(text[fence + 7:close].strip() if close > fence + 7 else None)
    first, last = text.find("{"), text.rfind("}")
    candidates += [body, _balanced_object(text), text[first:last + 1] if 0 <= first < last else None]
    for cand in candidates:
        if cand is not None and (found := _loads(cand)) is not None:
            break
    if found is None:
        found = _keyword_fallback(text)
    if not isinstance(found, dict) or not all(d in found for d in DIMENSIONS):
        return None
    return found


def _weight_of(text: str, table: dict[str, float]) -> tuple[float, bool]:
    """The release's criterion lookup: exact, then case-insensitive, then substring either way; else the
    dimension's mean weight (reported as unmatched). ``text`` is never empty (empty ones are skipped before)."""
    if text in table:
        return table[text], True
    low = text.lower()
    for key, w in table.items():
        if key.lower() == low:
            return w, True
    for key, w in table.items():
        if low in key.lower() or key.lower() in low:
            return w, True
    return sum(table.values()) / len(table), False


class _NotAScore(ValueError):
    pass


class _OffScale(_NotAScore):
    """A number, but not a judgement on the 0-10 scale (NaN, infinite, negative): the reply is unusable."""


def _judge_score(value: Any) -> float | None:
    """A judge's criterion score as the release reads it: ``float(value)``, None when absent; a value float()
    rejects raises :class:`_NotAScore` (skipped, as the release skips it); a non-finite or negative one raises
    :class:`_OffScale` (counted in ``off_scale``: the reply is unusable, see :meth:`DeepResearchBench.judge_parse`)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise _NotAScore(repr(value)) from exc
    if not math.isfinite(v) or v < 0:
        raise _OffScale(repr(value))
    return v


def race_scores(judged: dict[str, Any], criteria: dict[str, Any]) -> dict[str, Any]:
    """RACE's weighted scores for the target (article_1) and the reference (article_2), by the release's
    ``calculate_weighted_scores`` rules (read, not copied):

    - a dimension that is not a list, has no dimension weight or no criteria is skipped;
    - an item that is not a dict, or whose score float() rejects, is skipped (a NaN, infinite or negative
      score is also counted in ``off_scale``, which makes the reply unusable); an item with an empty (or
      whitespace) criterion, or without an ``article_1_score`` (``target_score`` stands in for it), is skipped
      (``empty_criteria`` / ``no_target_score`` count them);
    - a criterion **without an ``article_2_score``** still counts: its weight enters the denominator and the
      reference gets nothing for it (``missing_reference`` lists them); and when the dimension's last item
      read had no reference score, the dimension's whole reference average is 0 (the release tests the last
      item's value after its loop; ``reference_zeroed`` lists those dimensions). Computed as the release
      computes it, so the record shows what the release would score; a reply with either is unusable here
      (:meth:`DeepResearchBench.judge_parse`);
    - a dimension with no usable criterion averages 0 for both (the release): it adds nothing to either total
      and is listed in ``unscored``; its relative score is undefined, not 0.

    ``overall`` (and a dimension's ``relative``) is None when both totals are 0: 0/0 is no score (the release
    writes 0 there and averages it in; here the reply is unusable)."""
    dim_weights = criteria.get("dimension_weight") or {}
    weights = {d: {c["criterion"]: float(c["weight"]) for c in items}
               for d, items in (criteria.get("criterions") or {}).items()}
    target_total = reference_total = 0.0
    dims: dict[str, dict[str, Any]] = {}
    unmatched: list[str] = []
    missing_ref: list[str] = []
    zeroed: list[str] = []
    unscored: list[str] = []
    skipped = {"empty_criteria": 0, "no_target_score": 0, "invalid_score": 0, "off_scale": 0}
    for dim, items in judged.items():
        if not isinstance(items, list) or dim not in dim_weights or not weights.get(dim):
            continue
        t_sum = r_sum = w_sum = 0.0
        last_ref: float | None = None
        for item in items:
            if not isinstance(item, dict):
                continue
            raw = item.get("criterion")
            text = raw.strip() if isinstance(raw, str) else ""
            a1 = item.get("article_1_score")
            if a1 is None and item.get("target_score") is not None:
                a1 = item["target_score"]
            try:
                s1, s2 = _judge_score(a1), _judge_score(item.get("article_2_score"))
            except _NotAScore as exc:
                skipped["invalid_score"] += 1
                skipped["off_scale"] += isinstance(exc, _OffScale)
                continue
            last_ref = s2
            if not text or s1 is None:
                skipped["empty_criteria" if not text else "no_target_score"] += 1
                continue
            w, matched = _weight_of(text, weights[dim])
            if not matched:
                unmatched.append(f"{dim}:{text[:60]}")
            t_sum += s1 * w
            w_sum += w
            if s2 is None:
                missing_ref.append(f"{dim}:{text[:60]}")
            else:
                r_sum += s2 * w
        if w_sum > 0:
            t_avg = t_sum / w_sum
            r_avg = r_sum / w_sum if last_ref is not None else 0.0
            if last_ref is None and r_sum:
                zeroed.append(dim)
        else:
            t_avg = r_avg = 0.0
            unscored.append(dim)
        dims[dim] = {"target": t_avg, "reference": r_avg,
                     "relative": t_avg / (t_avg + r_avg) if t_avg + r_avg > 0 else None}
        target_total += t_avg * float(dim_weights[dim])
        reference_total += r_avg * float(dim_weights[dim])
    overall = target_total / (target_total + reference_total) if target_total + reference_total > 0 else None
    return {"overall": overall, "target_total": target_total, "reference_total": reference_total,
            "dims": {d: v for d, v in dims.items() if v["relative"] is not None},
            "unscored": sorted(set(unscored) | {d for d, v in dims.items() if v["relative"] is None}),
            "unmatched": unmatched, "missing_reference": missing_ref, "reference_zeroed": zeroed, **skipped}


class DeepResearchBench(Benchmark):
    domain = "research"
    hidden_fields = ("criteria", "reference")

    def load(self, root: str | Path | None = None) -> tuple[list[Problem], DataInfo]:
        base = data_dir(root)
        files = self.cfg["files"]
        tasks = read_jsonl(base / files["queries"])
        criteria = {c["prompt"]: c for c in read_jsonl(base / files["criteria"])}
        ref_path = base / files["reference"]
        if not ref_path.is_file():
            raise DataMissingError(
                f"DeepResearch Bench reference articles {ref_path} are missing (RACE scores against them): run "
                "`make data` with internet access (it downloads cleaned_data/reference.jsonl and checks its git "
                "blob id 2b0f090208527f0bf518516458de91b1d5a8fe75); they are not in ../shared/datasets")
        references = {r["prompt"]: r["article"] for r in read_jsonl(ref_path)}
        langs = self.cfg.get("languages")
        rows = [t for t in tasks if not langs or t["language"] in langs]
        for t in rows:
            for what, table in (("criteria", criteria), ("reference article", references)):
                if t["prompt"] not in table:
                    raise ValueError(f"DeepResearch Bench task {t['id']}: no {what} for its prompt")
        idx = select(rows, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        problems = [self._problem(rows[i], pos, criteria, references) for pos, i in enumerate(idx)]
        paths = [base / files[k] for k in ("queries", "criteria", "reference")]
        return problems, DataInfo(file="+".join(map(str, paths)), sha256=files_digest(paths), total=len(rows),
                                  selected=len(problems), split=str(self.cfg.get("split", "test")))

    def _problem(self, row: dict[str, Any], pos: int, criteria: dict[str, Any], refs: dict[str, str]) -> Problem:
        fields = {"prompt": row["prompt"], "language": row["language"], "topic": row.get("topic"),
                  "criteria": criteria[row["prompt"]], "reference": refs[row["prompt"]]}
        return Problem(id=f"deepresearch/{row['id']}", index=pos, fields=fields, gold=refs[row["prompt"]],
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return problem.fields["prompt"]

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return (text or "").strip(), "article"

    async def score(self, text: str, problem: Problem) -> Score:
        raise RuntimeError("DeepResearch Bench has no deterministic score: RACE is computed by the judge role "
                           "(benchmark.judge.headline: true); set backbone@roles.judge=<config>")

    # ---- RACE through the runner's judge (harness/judge.py, kind: benchmark) ----------------------
    def judge_messages(self, problem: Problem, answer: str) -> list[dict[str, str]]:
        lang = "zh" if problem.fields["language"] == "zh" else "en"
        template = (PROMPTS / f"race_{lang}.txt").read_text(encoding="utf-8")
        prompt = template.format(task_prompt=problem.fields["prompt"], article_1=(answer or "").strip(),
                                 article_2=problem.fields["reference"],
                                 criteria_list=criteria_for_prompt(problem.fields["criteria"]))
        return [{"role": "user", "content": prompt}]

    def judge_parse(self, text: str, problem: Problem) -> dict[str, Any] | None:
        """RACE of one judge reply; None (asked again, then the problem's error) when the reply is not a
        judgement (:meth:`judge_unusable` says why). An empty dimension is scored as the release scores it
        (listed in ``unscored``)."""
        race, why = self._race_reading(text, problem)
        if why is not None:
            return None
        return {"score": race["overall"], "race": race, "race_version": RACE_VERSION}

    def judge_unusable(self, text: str, problem: Problem) -> str | None:
        """Why a judge reply is not a judgement (recorded for each reply asked again), None when it is one."""
        return self._race_reading(text, problem)[1]

    def _race_reading(self, text: str, problem: Problem) -> tuple[dict[str, Any] | None, str | None]:
        """(RACE of the reply, why it is unusable or None). Unusable: no parsable JSON or a dimension missing
        (``unparsed``: the release's retry conditions); a score off the 0-10 scale (``off_scale``: NaN,
        infinite, negative); a reply that does not score the reference (``missing_reference``: a criterion
        without ``article_2_score``; ``reference_zeroed``: a dimension the release's last-item rule would zero;
        the release scores the reference 0 there, so the report would win the dimension outright); an overall
        ratio that is 0/0 (``no_score``: the release would write 0). The judge failing is our instrument
        failing, never the report's score."""
        judged = parse_race_json(text)
        if judged is None:
            return None, "unparsed"
        race = race_scores(judged, problem.fields["criteria"])
        if race["off_scale"]:
            return race, "off_scale"
        if race["missing_reference"]:
            return race, "missing_reference"
        if race["reference_zeroed"]:
            return race, "reference_zeroed"
        if race["overall"] is None:
            return race, "no_score"
        return race, None

    # ---- the search tool ----------------------------------------------------------------------------
    @cached_property
    def _index(self) -> BM25Corpus | TavilySearch | None:
        search = self.cfg.get("search") or {}
        backend = search.get("backend", "bm25")
        if backend == "tavily":
            return TavilySearch(search.get("url", TavilySearch.URL), search.get("api_key_env", "TAVILY_API_KEY"),
                                float(search.get("timeout_s", 30)))
        if backend != "bm25":
            raise ValueError(f"benchmark.search.backend={backend!r}: choose bm25 (a local corpus) or tavily")
        if not search.get("corpus"):
            return None
        path = Path(search["corpus"])
        return BM25Corpus(path if path.is_absolute() else data_dir() / path)

    def tools(self, problem: Problem):  # list[harness.tools.Tool]
        from agentic_repro.harness.tools import Tool

        index = self._index
        if index is None:
            return []
        k_default = int((self.cfg.get("search") or {}).get("k", 5))

        async def search(query: str, k: int = k_default) -> list[dict[str, str]]:
            return await asyncio.to_thread(index.search, str(query), int(k))

        return [Tool("search", search, "Search the document collection; returns the k best {id, title, text} "
                     "passages for a query (BM25).", {"query": "what to look for", "k": "how many results"})]


class BM25Corpus:
    """A local BM25 index (bm25s, English stop words) over a JSONL of ``{id, title, text}`` documents."""

    def __init__(self, path: Path) -> None:
        try:
            import bm25s  # pyright: ignore[reportMissingImports]  (the agents extra)
        except ImportError as exc:  # the `agents` extra
            raise RuntimeError("the search tool needs bm25s: pip install -e '.[agents]'") from exc
        self.docs = read_jsonl(path)
        self._bm25s = bm25s
        self._index = bm25s.BM25()
        self._index.index(bm25s.tokenize([f"{d.get('title', '')} {d['text']}" for d in self.docs],
                                         stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int = 5) -> list[dict[str, str]]:
        k = max(1, min(k, len(self.docs)))
        tokens = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:  # nothing left of the query after stop words
            return []
        ids, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        return [{"id": str(self.docs[i].get("id", i)), "title": self.docs[i].get("title", ""),
                 "text": self.docs[i]["text"]} for i, s in zip(ids[0], scores[0]) if s > 0]


class TavilySearch:
    """Web search through Tavily's API (``POST {url}`` with ``query``/``max_results``; key from the environment)."""

    URL = "https://api.tavily.com/search"

    def __init__(self, url: str, key_env: str, timeout_s: float) -> None:
        self.key = os.environ.get(key_env)
        if not self.key:
            raise RuntimeError(f"benchmark.search.backend=tavily needs ${key_env} (a Tavily API key); "
                               "or use backend=bm25 with a local corpus")
        self.url, self.timeout_s = url, timeout_s

    def search(self, query: str, k: int = 5) -> list[dict[str, str]]:
        import urllib.request

        body = json.dumps({"query": query, "max_results": int(k)}).encode()
        req = urllib.request.Request(self.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {self.key}"})
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # configured https URL
            data = json.loads(resp.read())
        return [{"id": r.get("url", str(i)), "title": r.get("title", ""), "text": r.get("content", "")}
                for i, r in enumerate(data.get("results") or [])][:k]
