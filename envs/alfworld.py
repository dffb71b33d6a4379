"""ALFWorld (Shridhar et al., 2021), the text-only TextWorld games: one problem per game, scored by ``won``.

The games are the official evaluation splits (``valid_seen`` 140 games, ``valid_unseen`` 134), one
``game.tw-pddl`` per game under ``$AGENTIC_REPRO_DATA/alfworld/json_2.1.1/<split>/<task>/<trial>/``
(``make data``). The engine is alfworld 0.4.2's: ``textworld.start`` on the game file with the
``AlfredDemangler(shuffle=False)`` and ``AlfredInfos`` wrappers and ``won`` + admissible commands requested
(the set-up AlfredTWEnv uses for evaluation, without its traj_data.json look-up; agent-envs.md). It is
synchronous (a reset ~1 s, a step ~65 ms), so ``configs/benchmark/alfworld.yaml`` runs it in worker
processes (:mod:`agentic_repro.harness.env`).

Since alfworld 0.4.0 "put O in/on R" is "move O to R" (alfworld PR #94); the ReAct/Reflexion few-shot
prompts use the old form, which the engine answers with "Nothing happens.". ``action_rewrite: put_to_move``
(default) rewrites the old form before sending it and records ``rewritten_from`` in the step's info;
``action_rewrite: none`` sends actions unchanged.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from agentic_repro.evaluators.data import DataMissingError, data_dir
from agentic_repro.harness.benchmark import Benchmark, DataInfo
from agentic_repro.harness.env import EnvSpec, StepResult
from agentic_repro.harness.types import Problem

GAMES_DIR = "alfworld/json_2.1.1"
SPLITS = {"valid_seen": 140, "valid_unseen": 134}
TASK_TYPES = ("pick_and_place_simple", "pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep",
              "pick_cool_then_place_in_recep", "look_at_obj_in_light", "pick_two_obj_and_place")
_PUT = re.compile(r"^put (.+?) (?:in/on|in|on) (.+)$")


def rewrite_action(action: str, rule: str) -> str:
    """The action the engine receives under ``action_rewrite`` (``put_to_move`` or ``none``)."""
    if rule == "none":
        return action
    if rule != "put_to_move":
        raise ValueError(f"alfworld action_rewrite={rule!r}: choose put_to_move or none")
    m = _PUT.match(action)
    return f"move {m.group(1)} to {m.group(2)}" if m else action


def task_type(problem_id: str) -> str:
    folder = problem_id.split("/")[1]
    for t in TASK_TYPES:
        if folder.startswith(t + "-"):
            return t
    raise ValueError(f"ALFWorld game {problem_id!r}: unknown task type in {folder!r}")


def game_files(root: Path, split: str) -> list[Path]:
    base = root / split
    files = sorted(base.glob("*/*/game.tw-pddl"))
    if not files:
        raise DataMissingError(f"ALFWorld split {split!r}: no game.tw-pddl under {base}; run `make data` (copies "
                               "the games from ../shared/datasets/alfworld) or point $AGENTIC_REPRO_DATA at a folder "
                               f"with {GAMES_DIR}/")
    return files


class ALFWorld(Benchmark):
    """A benchmark whose problems are ALFWorld games (id = ``<split>/<task folder>/<trial>``)."""

    domain = "env"

    def games_root(self) -> Path:
        return data_dir(self.cfg.get("data_dir")) / self.cfg.get("games_dir", GAMES_DIR)

    def load(self) -> tuple[list[Problem], DataInfo]:
        split = self.cfg.get("split", "valid_unseen")
        if split not in SPLITS:
            raise ValueError(f"benchmark alfworld: split {split!r} is not one of {sorted(SPLITS)}")
        root = self.games_root()
        files = game_files(root, split)
        if len(files) != SPLITS[split] and not self.cfg.get("allow_partial_split", False):
            raise ValueError(f"ALFWorld {split}: found {len(files)} games under {root / split}, expected "
                             f"{SPLITS[split]}; re-run `make data`")
        digest = hashlib.sha256()
        for f in files:
            digest.update(f.read_bytes())
        ids = [str(f.parent.relative_to(root)) for f in files]
        from agentic_repro.evaluators.data import select

        idx = select(ids, limit=self.cfg.get("limit"), sample=self.cfg.get("sample"),
                     sample_seed=int(self.cfg.get("sample_seed", 0)))
        problems = [Problem(id=ids[i], index=pos, fields={"split": split, "task_type": task_type(ids[i])},
                            gold=None, benchmark=self.name) for pos, i in enumerate(idx)]
        return problems, DataInfo(file=str(root / split), sha256=digest.hexdigest(), total=len(ids),
                                  selected=len(problems), split=split)

    def env_spec(self) -> EnvSpec | None:
        """The ``env:`` block with the games folder filled in from this config (one source for both sides)."""
        spec = super().env_spec()
        if spec is None:
            return None
        params = {"games_dir": self.cfg.get("games_dir", GAMES_DIR), "data_dir_override": self.cfg.get("data_dir"),
                  **spec.params}
        return EnvSpec(**{**spec.__dict__, "params": params})

    def render(self, problem: Problem) -> str:
        return (f"ALFWorld game {problem.id} ({problem.fields['task_type']}): the task is stated in the first "
                "observation of the environment session.")

    def extract(self, text: str, problem: Problem) -> tuple[Any, str]:
        return (text or "").strip() or None, "raw"

    async def score(self, text: str, problem: Problem):  # an environment is scored by its episodes
        raise TypeError("ALFWorld is an environment: the score comes from the episodes (score_episodes)")


class ALFWorldEngine:
    """The real ALFWorld text engine for one session (synchronous: runs in a worker process)."""

    def __init__(self, games_dir: str = GAMES_DIR, data_dir_override: str | None = None,
                 action_rewrite: str = "put_to_move") -> None:
        import textworld  # noqa: F401 - fail at construction when the `agents` extra is missing  # pyright: ignore[reportMissingImports]

        rewrite_action("", action_rewrite)  # validate the option early
        self.root = data_dir(data_dir_override) / games_dir
        self.action_rewrite = action_rewrite
        self._env: Any = None
        self._won = False

    def _start(self, gamefile: Path) -> Any:
        import textworld  # pyright: ignore[reportMissingImports]  (the agents extra)
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos  # pyright: ignore[reportMissingImports]

        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        return textworld.start(str(gamefile), request_infos=infos,
                               wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])

    def reset(self, problem: Problem, seed: int) -> StepResult:
        self.close()
        gamefile = self.root / problem.id / "game.tw-pddl"
        if not gamefile.is_file():
            raise FileNotFoundError(f"ALFWorld game file {gamefile} is missing (run `make data`)")
        self._env = self._start(gamefile)
        state = self._env.reset()
        self._won = bool(state["won"])
        return StepResult(state.feedback, 0.0, False,
                          {"won": self._won, "task_type": task_type(problem.id),
                           "seed_used": False},  # the text games are deterministic; the seed is not used
                          list(state["admissible_commands"]))

    def step(self, action: Any) -> StepResult:
        if self._env is None:
            raise RuntimeError("ALFWorld step before reset")
        text = str(action).strip()
        command = rewrite_action(text, self.action_rewrite)
        state, score, done = self._env.step(command)
        won = bool(state["won"])
        reward = 1.0 if won and not self._won else 0.0
        self._won = won
        info: dict[str, Any] = {"won": won, "success": won, "game_score": score}
        if command != text:
            info["rewritten_from"] = text
            info["sent"] = command
        return StepResult(state.feedback, reward, bool(done) or won, info, list(state["admissible_commands"]))

    def close(self) -> None:
        if self._env is not None:
            try:
                self._env.close()
            finally:
                self._env = None
