"""DyFlow's options and the Table 4 ablation variants.

Every option the paper does not fix is named here with its source in ``dyflow/README.md``;
:meth:`Options.resolved` is what each prediction's trace records (the run's config.yaml has the params).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

# variant -> (results-folder name, what it switches). The designer adapters of w/o KTO / w/o SFT are bound
# in their method configs (roles.designer.adapter), not here: the control flow is the full method's.
VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "wo_kto": {},
    "wo_sft": {},
    "wo_dynamic_operator": {"planning": "fixed_template"},
    "wo_dynamic_planning": {"planning": "single_stage"},
}

TEMPERATURES = {   # designer, executor (summariser: the release's ModelService default 0.01 in both)
    "paper": (0.01, 0.01),     # D.3: "both the designer and executor are run with temperature 0.01"
    "release": (0.1, 0.1),     # workflow.py designer call 0.1; operator.py executor default 0.1
}


@dataclass
class Options:
    variant: str = "full"
    planning: str = "dynamic"            # dynamic | single_stage (w/o dynamic planning) | fixed_template (w/o dyn. op.)

    # ---- Algorithm 1 budget and the release's stage rules (workflow.py) ----
    t_max: int = 8                       # designer calls (workflow.py max_iterations = 8)
    max_stages: int = 8                  # executed stages: the release's 8 iterations can run an 8th stage (its
                                         # prompt's "Maximum 7 stages total" is advice; 7 = that advice enforced)
    notice_from_stage: int = 5           # "Constraint: ..." appended when >= 4 stages exist
    terminate_notice_stage: int = 7      # "Termination Required: ..." appended when >= 6 stages exist
    validation: str = "release"          # release: run what the release runs | strict: the Design Rules as checks
    organize_alone: bool = True          # strict only: "NEVER mix ORGANIZE_SOLUTION with other operators"
    loop_guard: int = 3                  # LOOP DETECTED when each of the last 3 stages ran REVIEW_SOLUTION (0 = off)
    loop_warning_in_prompt: bool = True  # ours: the release sets the warning but never shows it to the designer
    first_stage_needs_problem: bool = True   # "On the first solving stage, always pass original_problem"
    errors_in_summary: bool = True       # paper §3.1: s_t holds errors (release: logged, not shown)
    operator_catalogue: str = "release"  # release (the released designer prompt verbatim) | paper (Table 6 list)
    unknown_template: str = "error"      # error (re-ask) | default (the release's silent DEFAULT fallback)
    key_repair: str = "off"              # off (re-ask) | drop: unknown input keys dropped (ours, for weak designers)

    # ---- the designer's adapter (w/o KTO, w/o SFT, DyPlanner) ----
    designer_adapter: str | None = None  # required adapter; used per call when the role binds none

    # ---- designer output: parse, repair once, re-ask ----
    repair: bool = True                  # json-repair once per attempt before a re-ask
    max_reasks: int = 2                  # re-asks per stage after the first attempt (bounded; ours)
    no_answer: str = "last_output"       # last_output (ours) | empty (release: returns None)

    # ---- sampling ----
    temperatures: str = "paper"          # paper (0.01 / 0.01) | release (0.1 / 0.1)
    summarizer_temperature: float = 0.01
    designer_max_tokens: int | None = None   # None: the run's sampling.max_tokens
    executor_max_tokens: int | None = None
    summarizer_max_tokens: int | None = None
    ensemble_samples: int = 5            # operator.py num_samples
    ensemble_temperature: float = 0.7    # operator.py ensemble_temperature
    ensemble_max_tokens: int | None = 2048   # operator.py (None: the run's)
    selector_temperature: float = 0.0
    selector_max_tokens: int | None = 1024   # min(ensemble_max_tokens, 1024)

    # ---- task text and final answer ----
    task_suffix: str = "release"         # release (run_dataset.py per domain) | none
    append_answer_instruction: bool = True   # + the benchmark's answer format where the release suffix has none
    code_postprocess: str = "none"       # none | release (§3.2 extraction prompt on the executor role)
    test_code: str = "public_tests"      # public_tests (sandbox, tests the task shows) | off

    # ---- w/o dynamic operator: the fixed-stage template ----
    fixed_max_refines: int = 2           # REFINE+REVIEW stages after the first until the review accepts

    # recorded, not used by the control flow
    folder: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, params: dict[str, Any]) -> Options:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise ValueError(f"unknown DyFlow option(s) {unknown}; see dyflow/README.md")
        variant = str(params.get("variant", "full"))
        if variant not in VARIANTS:
            raise ValueError(f"unknown DyFlow variant {variant!r}; choose one of {sorted(VARIANTS)}")
        merged = {**VARIANTS[variant], **params}
        if variant in ("wo_dynamic_operator", "wo_dynamic_planning") and "planning" in params \
                and params["planning"] != VARIANTS[variant]["planning"]:
            raise ValueError(f"variant {variant} fixes planning={VARIANTS[variant]['planning']}")
        opts = cls(**merged)
        opts.check()
        return opts

    def check(self) -> None:
        choices = {"planning": ("dynamic", "single_stage", "fixed_template"),
                   "operator_catalogue": ("release", "paper"), "unknown_template": ("error", "default"),
                   "key_repair": ("off", "drop"), "validation": ("release", "strict"),
                   "no_answer": ("last_output", "empty"), "temperatures": tuple(TEMPERATURES),
                   "task_suffix": ("release", "none"), "code_postprocess": ("none", "release"),
                   "test_code": ("public_tests", "off")}
        for k, allowed in choices.items():
            if getattr(self, k) not in allowed:
                raise ValueError(f"dyflow option {k}={getattr(self, k)!r}; choose one of {list(allowed)}")
        if self.t_max < 1 or self.max_stages < 1 or self.max_reasks < 0 or self.ensemble_samples < 1:
            raise ValueError("t_max, max_stages, ensemble_samples must be >= 1 and max_reasks >= 0")

    @property
    def designer_temperature(self) -> float:
        return TEMPERATURES[self.temperatures][0]

    @property
    def executor_temperature(self) -> float:
        return TEMPERATURES[self.temperatures][1]

    def resolved(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("extra")
        out["designer_temperature"] = self.designer_temperature
        out["executor_temperature"] = self.executor_temperature
        return out
