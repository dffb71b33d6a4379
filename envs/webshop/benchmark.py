"""WebShop (Yao et al., 2022) as a benchmark: one problem per human-instruction goal, scored by the purchase.

Goals are the human instructions of the 1,000-product setting, built and shuffled as the original
(:mod:`agentic_repro.envs.webshop.catalog`); problem ``i`` is the original's session ``fixed_i``, and ReAct and Reflexion
evaluate goals 0-499 (``goals: [0, 500]``). The goal is the problem's ``gold`` (scorer side); a method sees
only ``goal_index`` and what the environment shows (the instruction text on the search page).

The score is the environment's: ``score: success`` (default; AUQ's success rate = reward 1.0) or ``score:
reward`` (ReAct's average score). :meth:`WebShop.score_episodes` recomputes the purchase reward scorer-side
from the same catalogue and goal, checks it equals what the environment reported (a mismatch is an error),
and records its parts (r_type, attribute/option matches, price) and the noun tagger used.

The real product files are not obtainable offline (``make data`` downloads them; see envs/README.md).
A run on any other product file (the tests' hand-made fixture) needs ``allow_unverified_data: true`` and a
benchmark name other than ``webshop`` (results land under that name), and is labelled ``unverified`` in
meta.json's data record: such numbers are never WebShop results.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from agentic_repro.envs.data import WEBSHOP_FILES, webshop_missing_message
from agentic_repro.envs.webshop import catalog
from agentic_repro.envs.webshop.reward import noun_tagger, purchase_reward
from agentic_repro.evaluators.data import DataMissingError, data_dir, select
from agentic_repro.harness.benchmark import Benchmark, DataInfo
from agentic_repro.harness.env import EnvSpec
from agentic_repro.harness.types import Problem, Score

FILE_KEYS = {"products": "items_shuffle_1000.json", "attributes": "items_ins_v2_1000.json",
             "human": "items_human_ins.json"}


class WebShop(Benchmark):
    domain = "env"

    def __init__(self, cfg: dict[str, Any]) -> None:
        super().__init__(cfg)
        self._catalog: tuple[dict[str, dict[str, Any]], dict[str, float]] | None = None
        self._nouns: Any = None

    # ---- data ----------------------------------------------------------------------------------
    def files(self) -> dict[str, Path]:
        root = data_dir(self.cfg.get("data_dir"))
        given = self.cfg.get("files") or {}
        return {k: (root / given.get(k, f"webshop/{name}")).resolve() for k, name in FILE_KEYS.items()}

    def _check_files(self) -> tuple[dict[str, Path], bool]:
        files = self.files()
        missing = [p.name for p in files.values() if not p.is_file()]
        if missing:
            raise DataMissingError(webshop_missing_message(missing, next(iter(files.values())).parent))
        verified = all(hashlib.sha256(files[k].read_bytes()).hexdigest() == WEBSHOP_FILES[FILE_KEYS[k]][1]
                       for k in FILE_KEYS)
        if not verified and not self.cfg.get("allow_unverified_data", False):
            raise ValueError("WebShop: the product files' sha256 differ from the original 1,000-product files "
                             f"({', '.join(str(p) for p in files.values())}); re-run `make data`, or set "
                             "benchmark.allow_unverified_data=true for a test fixture (never reported as WebShop)")
        if not verified and self.name == "webshop":
            raise ValueError("WebShop: unverified product files cannot run under the name 'webshop' (their numbers "
                             "are not WebShop results): set benchmark.name=webshop-fixture (or another name)")
        return files, verified

    def load(self) -> tuple[list[Problem], DataInfo]:
        files, verified = self._check_files()
        products, prices, goals = catalog.build(files["products"], files["attributes"], files["human"],
                                                int(self.cfg["price_seed"]))
        self._catalog = ({p["asin"]: p for p in products}, prices)
        lo, hi = (self.cfg.get("goals") or [0, len(goals)])
        hi = min(int(hi), len(goals))
        ids = list(range(int(lo), hi))
        idx = select(ids, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        problems = [Problem(id=f"fixed_{ids[i]}", index=pos, fields={"goal_index": ids[i]}, gold=goals[ids[i]],
                            benchmark=self.name) for pos, i in enumerate(idx)]
        digest = hashlib.sha256(b"".join(files[k].read_bytes() for k in FILE_KEYS)).hexdigest()
        split = f"goals {lo}-{hi - 1} of {len(goals)}" + ("" if verified else " (unverified data: not WebShop)")
        return problems, DataInfo(file=str(files["products"]), sha256=digest, total=len(goals),
                                  selected=len(problems), split=split)

    # ---- environment ---------------------------------------------------------------------------
    def env_spec(self) -> EnvSpec | None:
        """The ``env:`` block with the data files, price seed and protocol filled in from this config."""
        spec = super().env_spec()
        if spec is None:
            return None
        files = self.files()
        params = {"products": str(files["products"]), "attributes": str(files["attributes"]),
                  "human": str(files["human"]), "price_seed": int(self.cfg["price_seed"]),
                  "protocol": self.cfg.get("protocol", "react"), "results_shown": int(self.cfg.get("results_shown", 10)),
                  "show_attrs": bool(self.cfg.get("show_attrs", False)),
                  "noun_tagger_kind": self.cfg.get("noun_tagger", "auto"), **spec.params}
        return EnvSpec(**{**spec.__dict__, "params": params})

    def render(self, problem: Problem) -> str:
        return (f"WebShop session fixed_{problem.fields['goal_index']}: the instruction is shown on the search page "
                "of the environment session.")

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return (text or "").strip() or None, "raw"

    async def score(self, text: str, problem: Problem) -> Score:
        raise TypeError("WebShop is an environment: the score comes from the episodes (score_episodes)")

    async def score_episodes(self, episodes: list[Any], problem: Problem) -> Score:
        if not episodes:
            return await super().score_episodes(episodes, problem)  # raises NoEpisode: an error, not a 0
        last = episodes[-1]
        bought = [r for r in last.trajectory if r.get("event") == "step" and "purchased" in (r.get("info") or {})]
        details: dict[str, Any] = {"rule": "environment", "episode": last.index, "steps": last.steps,
                                   "done": last.done, "truncated": last.truncated, "episodes": len(episodes)}
        if not bought:   # the tagger is recorded on every scored problem: the tables read it from each run
            return Score(0.0, None, {**details, "reward": 0.0, "success": False, "purchased": None,
                                     "noun_tagger": self.tagger()[1]})
        info = bought[-1]["info"]
        reward = float(info["reward"])
        parts = self._recompute(problem, info["purchased"], reward)
        if info.get("noun_tagger") != self.tagger()[1]:
            raise RuntimeError(f"WebShop {problem.id}: the environment tagged nouns with {info.get('noun_tagger')}, "
                               f"the scorer with {self.tagger()[1]}")
        value = float(reward == 1.0) if self.cfg.get("score", "success") == "success" else reward
        return Score(value, info["purchased"]["asin"], {**details, "reward": reward, "success": reward == 1.0,
                                                        "purchased": info["purchased"], "reward_parts": parts,
                                                        "noun_tagger": info.get("noun_tagger")})

    def tagger(self) -> tuple[Any, str]:
        """(noun tagger, recorded name) of ``noun_tagger`` (envs/webshop/reward.py), resolved once."""
        if self._nouns is None:
            self._nouns = noun_tagger(self.cfg.get("noun_tagger", "auto"))
        return self._nouns

    def _recompute(self, problem: Problem, purchased: dict[str, Any], reported: float) -> dict[str, Any]:
        if self._catalog is None:
            files, _ = self._check_files()
            products, prices, _ = catalog.build(files["products"], files["attributes"], files["human"],
                                                int(self.cfg["price_seed"]))
            self._catalog = ({p["asin"]: p for p in products}, prices)
        by_asin, prices = self._catalog
        reward, parts = purchase_reward(by_asin[purchased["asin"]], problem.gold, prices[purchased["asin"]],
                                        purchased["options"], self.tagger()[0])
        if abs(reward - reported) > 1e-9:
            raise RuntimeError(f"WebShop {problem.id}: the environment reported reward {reported}, the scorer "
                               f"recomputes {reward}")
        return parts
