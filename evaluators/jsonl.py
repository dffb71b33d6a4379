"""A benchmark declared in YAML: rows of a JSONL file, the fields a prompt shows, a template, a named extractor
and a named scorer (the shape of lm-evaluation-harness' task YAML). GSM8K and DROP are declared so
(configs/benchmark/gsm8k.yaml, drop.yaml); docs/writing-a-benchmark.md shows a new one.

Config keys beside the usual ``name``/``version``/``metric``/``split``/``splits``/``answer_instruction``::

    domain: math                      # math | qa | generic (what methods branch on)
    fields: {question: question}      # prompt field: row key, or {field: key, strip_suffix: "Answer:"}
    id: {field: id, default: "gsm8k-{split}-{index}"}   # the row's id, else the default (0-based row index)
    gold: {field: answer, read: text} # read: a name in extract.GOLD_READERS
    prompt: "{question}"              # the task the model reads: str.format over the fields
    extract: last_number              # a name in extract.EXTRACTORS, or a key of `readings`
    readings: {...}                   # numeric only: reading name -> extractor; all are scored and recorded
    scorer: numeric                   # numeric | f1 (f1_mode: aflow | official) | exact | math (equivalence: ...) | code

``scorer: code`` runs the extracted program in the sandbox against the gold, which holds the hidden tests (so a
method never sees them)::

    code: {shape: humaneval, entry_point: entry_point, prefix: prompt}   # shape: humaneval | asserts
    extract: fences                   # the code extractor (extract.extract_code), the only one for code
    execute_code: true                # opt-in, as for HumanEval; sandbox: {timeout_s, memory_mb}

``humaneval``: the solution is the ``prefix`` field (the prompt it continues; omit it for none) + the program, the
gold is a ``check(candidate)`` test, called on the ``entry_point`` field's function (HumanEval's layout);
``asserts``: the gold is a list of asserts (or its JSON / Python literal), run after the program (MBPP's layout,
without setup code or imports). Both fields are declared in ``fields:`` (a method sees the function's name, as in
HumanEval).

Only the named fields reach the :class:`Problem` (so no other column of the row can reach a method), and the
gold is read into ``Problem.gold``, which a method never sees. Every name is checked when the benchmark is built:
a typo is a config error naming the key and the choices, before any call.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from agentic_repro.evaluators import extract as ex
from agentic_repro.evaluators import scorers
from agentic_repro.evaluators.base import Benchmark
from agentic_repro.evaluators.math_verify_equiv import CHECKER_TIMEOUTS
from agentic_repro.harness.types import Problem, Score

SCORERS = ("numeric", "f1", "exact", "math", "code")
EQUIVALENCES = ("math_verify", "aflow")
DOMAINS = ("math", "qa", "code", "generic")
CODE_SHAPES = ("humaneval", "asserts")
CODE_EXTRACTORS = ("fences",)


def _choice(value: Any, choices: Any, key: str) -> str:
    if value not in choices:
        raise ValueError(f"benchmark.{key}={value!r}: choose one of {sorted(choices)}")
    return str(value)


class JSONLBenchmark(Benchmark):
    """The benchmark a YAML file declares (see the module docstring for its keys)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        where = f"benchmark {self.name}"
        for key in ("fields", "gold", "prompt", "extract", "scorer"):
            if cfg.get(key) in (None, "", {}):
                raise ValueError(f"{where}: a JSONL benchmark needs `{key}:` (docs/writing-a-benchmark.md)")
        self.domain = _choice(cfg.get("domain", "generic"), DOMAINS, "domain")
        self.scorer = _choice(cfg["scorer"], SCORERS, "scorer")
        self.fields: dict[str, dict[str, Any]] = {
            name: ({"field": spec} if isinstance(spec, str) else dict(spec)) for name, spec in cfg["fields"].items()}
        for name, spec in self.fields.items():
            unknown = set(spec) - {"field", "strip_suffix"}
            if "field" not in spec or unknown:
                raise ValueError(f"{where}: fields.{name} must be a row key or {{field: key, strip_suffix: ...}}"
                                 f"{f' (unknown: {sorted(unknown)})' if unknown else ''}")
        gold = cfg["gold"] if isinstance(cfg["gold"], dict) else {"field": cfg["gold"]}
        self.gold_field = str(gold["field"])
        self.read_gold = ex.GOLD_READERS[_choice(gold.get("read", "text"), ex.GOLD_READERS, "gold.read")]
        ident = cfg.get("id") or {}
        self.id_field, self.id_default = ident.get("field", "id"), ident.get("default", f"{self.name}-{{index}}")
        try:  # the template names only declared fields: a typo fails here, not on the first problem
            str(cfg["prompt"]).format(**{name: "" for name in self.fields})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"{where}: prompt {cfg['prompt']!r} is not a template over fields "
                             f"{sorted(self.fields)} ({exc!r})") from exc
        if self.scorer == "code":
            self.code = self._code_spec(cfg, where)
            self.mode, self.readings = _choice(cfg["extract"], CODE_EXTRACTORS, "extract"), {}
        elif cfg.get("readings"):
            if self.scorer != "numeric":
                raise ValueError(f"{where}: readings: is for scorer: numeric (the one that records every reading)")
            self.readings = {name: ex.EXTRACTORS[_choice(fn, ex.EXTRACTORS, f"readings.{name}")]
                             for name, fn in cfg["readings"].items()}
            self.mode = _choice(cfg["extract"], self.readings, "extract")
        else:
            self.mode = _choice(cfg["extract"], ex.EXTRACTORS, "extract")
            self.readings = {self.mode: ex.EXTRACTORS[self.mode]}
        if self.scorer == "f1":
            _choice(cfg.get("f1_mode", "aflow"), scorers.F1_MODES, "f1_mode")
        if self.scorer == "math":
            _choice(cfg.get("equivalence", "math_verify"), EQUIVALENCES, "equivalence")
            _choice(cfg.get("checker_timeout", "error"), CHECKER_TIMEOUTS, "checker_timeout")

    def _code_spec(self, cfg: dict[str, Any], where: str) -> dict[str, Any]:
        spec = dict(cfg.get("code") or {})
        unknown = set(spec) - {"shape", "entry_point", "prefix"}
        if unknown:
            raise ValueError(f"{where}: code: has unknown keys {sorted(unknown)} (shape, entry_point, prefix)")
        spec["shape"] = _choice(spec.get("shape", "humaneval"), CODE_SHAPES, "code.shape")
        for key in ("entry_point", "prefix"):
            name = spec.get(key)
            if key == "entry_point" and not name and spec["shape"] == "humaneval":
                raise ValueError(f"{where}: code.entry_point: names the field with the function's name")
            if name and name not in self.fields:
                raise ValueError(f"{where}: code.{key}={name!r} is not a declared field {sorted(self.fields)}")
        if cfg.get("readings"):
            raise ValueError(f"{where}: readings: is for scorer: numeric (the one that records every reading)")
        return spec

    # ---- loading -------------------------------------------------------------------------------
    def make_problem(self, row: dict[str, Any], row_index: int) -> Problem:
        fields = {}
        for name, spec in self.fields.items():
            value = row[spec["field"]]
            suffix = spec.get("strip_suffix")
            if suffix:  # e.g. AFlow's DROP passages end in the prompt's own "Answer:"
                value = str(value).rstrip()
                if value.endswith(suffix):
                    value = value[: -len(suffix)].rstrip()
            fields[name] = value
        pid = str(row.get(self.id_field) or self.id_default.format(split=self.cfg["split"], index=row_index))
        return Problem(id=pid, index=row_index, fields=fields, gold=self.read_gold(row[self.gold_field]),
                       benchmark=self.name)

    def render(self, problem: Problem) -> str:
        return str(self.cfg["prompt"]).format(**problem.fields)

    # ---- scoring -------------------------------------------------------------------------------
    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        if self.scorer == "code":
            entry = self.code.get("entry_point")
            return ex.extract_code(text or "", str(problem.fields[entry]) if entry else None)
        return self.readings[self.mode](text or "")

    def answer_key(self, extracted: Any) -> Hashable | None:
        if self.scorer == "code":
            return scorers.code_key(extracted)
        if self.scorer == "numeric":
            return scorers.numeric_key(extracted)
        if self.scorer == "math":
            return scorers.math_key(extracted)
        return scorers.text_key(extracted)

    async def score(self, text: str, problem: Problem) -> Score:
        if self.scorer == "numeric":
            return scorers.score_numeric(text, problem.gold, self.readings, self.mode)
        pred, rule = self.extract(text, problem)
        if self.scorer == "code":
            return await self._score_code(pred, rule, problem)
        if self.scorer == "f1":
            return scorers.score_f1(text, problem.gold, pred, rule, str(self.cfg.get("f1_mode", "aflow")))
        if self.scorer == "exact":
            return scorers.score_exact(text, problem.gold, pred, rule)
        return await scorers.score_math(text, problem.gold, pred, rule,
                                        equivalence=str(self.cfg.get("equivalence", "math_verify")),
                                        timeout=float(self.cfg.get("symbolic_timeout_s", 5.0)),
                                        on_timeout=str(self.cfg.get("checker_timeout", "error")))

    async def _score_code(self, code: str, rule: str, problem: Problem) -> Score:
        scorers.require_execution(self.cfg, self.name)
        from agentic_repro.evaluators.sandbox import humaneval_program, mbpp_program

        limits = self.cfg.get("sandbox") or {}
        program = None
        if code.strip() and self.code["shape"] == "humaneval":
            prefix = str(problem.fields[self.code["prefix"]]) if self.code.get("prefix") else ""
            program = humaneval_program(prefix, code, str(problem.gold), str(problem.fields[self.code["entry_point"]]))
        elif code.strip():
            program = mbpp_program(code, None, _asserts(problem.gold))
        return await scorers.score_code(code, rule, program, timeout_s=float(limits.get("timeout_s", 10.0)),
                                        memory_mb=int(limits.get("memory_mb", 1024)))


def _asserts(gold: Any) -> list[str]:
    """The ``asserts`` shape's gold: a list, or that list as JSON or a Python literal."""
    import ast

    value = ast.literal_eval(gold) if isinstance(gold, str) and gold.lstrip().startswith("[") else gold
    return [str(t) for t in value] if isinstance(value, list) else [str(value)]

