"""DenoiseFlow options and the Table 2 ablation variants.

Every option the paper does not fix is named here; ``denoiseflow/README.md`` lists each with its
source. ``Options.resolved()`` is what a run records (trace header and ``method_state.json``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agentic_repro.harness.options import build_variant_options

# variant id -> what it switches (see README "Ablations")
VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "wo_sa": {"semantic_anchoring": False},
    "wo_ab": {"adaptive_branching": False},
    "wo_clr": {"correction": "reexplore"},
    "wo_oc": {"online_calibration": False},
    "fixed_k7": {"fixed_k": 7},
    "full_restart": {"correction": "full_restart"},
    "local_retry": {"correction": "local_retry"},
}

_ALIASES = {
    "w/o_sa": "wo_sa", "w/o sa": "wo_sa", "no_sa": "wo_sa",
    "w/o_ab": "wo_ab", "w/o ab": "wo_ab", "no_ab": "wo_ab",
    "w/o_clr": "wo_clr", "w/o clr": "wo_clr", "no_clr": "wo_clr",
    "w/o_oc": "wo_oc", "w/o oc": "wo_oc", "no_oc": "wo_oc",
    "fixed_k=7": "fixed_k7", "fixed k=7": "fixed_k7", "fixedk7": "fixed_k7", "fixed-k7": "fixed_k7",
    "full restart": "full_restart", "full-restart": "full_restart", "reflexion": "full_restart",
    "local retry": "local_retry", "local-retry": "local_retry",
}


def canonical_variant(name: str) -> str:
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in VARIANTS:
        raise ValueError(f"unknown DenoiseFlow variant '{name}'; choose one of {sorted(VARIANTS)}")
    return key


@dataclass
class Options:
    # ---- variant and component switches (Table 2) ----
    variant: str = "full"
    semantic_anchoring: bool = True        # SA: Stage-1 understanding samples, slots, dependency graph
    adaptive_branching: bool = True        # AB: Branch route and consensus
    correction: str = "root_cause"         # CLR: root_cause | local_retry | full_restart | reexplore | off
    online_calibration: bool = True        # OC: temperature updates from verifier feedback
    fixed_k: int | None = None             # Fixed K: every problem branches with exactly this K

    # ---- paper defaults (§4.1, A.2, D.3) ----
    n_samples: int = 5
    sample_temperature: float = 0.7
    tau_sim: float = 0.85
    k_max: int = 7
    max_retries: int = 2
    t_init: float = 1.0
    t_min: float = 0.5
    t_max: float = 2.0

    # ---- Sensing ----
    entropy_norm: str = "log_n"            # log_n | log_k (peers.md §1.2 item 1)
    slots_math: list[str] = field(default_factory=lambda: ["goal", "constraints", "answer_form", "units"])
    slots_qa: list[str] = field(default_factory=lambda: ["question_type", "answer_form", "key_entities",
                                                         "reasoning_chain"])
    slot_agg: str = "max_noisy_or"         # max_noisy_or | max | noisy_or | mean (f_slot of Eq. 8)
    slot_mild_weight: float = 0.5          # beta in 1 - prod(1 - beta*u_s)
    step_uncertainty: str = "support"      # support | aligned_entropy
    step_tau: float = 0.75                 # cosine for "the same step" across plans (support form)
    struct_adjacent: float = 1.0           # P_struct(j -> j+1)
    struct_reference: float = 0.9          # P_struct when step t names step j ("step 2", "hop 1", "result of")
    struct_skip: float = 0.2               # P_struct for other earlier steps
    propagation_lambda: float = 0.5        # weight of the bottleneck channel vs the aggregation channel
    propagation_combine: str = "noisy_or"  # noisy_or | max : u~_t = combine(u_t, mix)
    propagated_readout: str = "max"        # max | terminal : the problem's graph risk
    fuse: str = "mean"                     # mean | noisy_or | max : global entropy u with graph risk
    calibration_form: str = "power"        # power (u^(1/T)) | scale (min(1, T*u))
    complexity_weights: dict[str, float] = field(default_factory=lambda: {
        "length": 1.0, "math": 1.0, "multi_step": 1.0, "constraint": 1.0, "numeric": 1.0, "multi_hop": 1.0})
    sense_max_tokens: int | None = None    # None = run default (paper: 4096 for every call)
    embedder: str = "minilm"               # minilm (all-MiniLM-L6-v2, the paper's) | hash (test double)
    folder: str | None = None              # the run's method.name (set by the yaml) to catch a variant/folder mismatch

    # ---- Regulating ----
    confidence_form: str = "linear"        # linear: (1-r)(1-w*complexity) | sigmoid: s((1-r-b)/s0)
    complexity_weight: float = 0.0         # 0: c = 1 - r exactly (App. I: 0.12->0.88, 0.45->0.55, 0.38->0.62)
    sigmoid_bias: float = 0.5
    sigmoid_scale: float = 0.15
    thresholds: str = "quantile"           # quantile | fixed
    tau_high: float = 0.75                 # fixed thresholds (also the cold start of quantile mode);
    #                                        App. I needs 0.62 < tau_high <= 0.88 and tau_low <= 0.55
    tau_low: float = 0.3
    q_high: float = 0.75                   # quantile of past confidences for Direct
    q_low: float = 0.25                    # quantile of past confidences for Refine
    quantile_min_history: int = 8
    quantile_min_gap: float = 0.02         # degenerate quantiles fall back to the fixed thresholds
    k_rule: str = "clusters"               # clusters (#semantic clusters, capped at K_max; App. I.2/I.4) |
    #                                        interpolate (k_min at tau_high .. K_max at tau_low) | linear
    k_min: int = 2
    refine_route_k: str = "k_max"          # Refine route branches with K_max before Correcting
    refine_route_stage3: str = "always"    # always (§3.5: the Refine regime enters Stage 3) | on_fail
    solve_analysis: bool = True            # G.2 + "Problem analysis" block carrying the E.4 seed (False: G.2 verbatim)
    conservative_max_u: float = 0.5        # conservative seed keeps slots with u_s <= this
    answer_clustering: str = "key"         # key (benchmark answer_key) | embedding (tau_sim on answers)
    consensus_alpha: float = 0.5           # validity
    consensus_beta: float = 0.2            # cohesion
    consensus_gamma: float = 0.3           # size share
    singleton_cohesion: float = 0.5
    unverified_validity: float = 0.5
    max_verify_clusters: int = 3
    solve_temperature_extra: float = 0.7   # temperature of branches beyond the E.4 seeds

    # ---- Correcting ----
    verify_direct: bool = True             # Direct answers are verified (D.2 needs low-u feedback)
    direct_on_fail: str = "refine"         # refine | accept
    tau_enf: float = 0.7                   # E.5 enforcement floor on failing slots
    u_boost: float = 1.0                   # E.5
    unrecovered_answer: str = "original"   # original | last : answer when no retry passes verification
    reroute: str = "branch"                # branch: the boosted root-cause step is re-routed (K_after branches) | single
    refine_keep_steps: bool = False        # G.4 + "earlier steps not implicated (keep them)" block (False: G.4 verbatim)
    refine_enforced_slots: bool = False    # G.4 + "uncertain aspects to re-check" block (False: G.4 verbatim)

    # ---- online calibration (D.1-D.3) ----
    window_size: int = 8
    calib_window: int = 32                 # feedback records considered (sliding)
    calib_u_low: float = 0.4               # "low uncertainty": r < this
    calib_u_high: float = 0.7              # "high uncertainty": r > this
    theta_acc: float = 0.7                 # Acc_low < theta_acc -> raise T
    theta_acc_high: float | None = None    # Acc_high > this -> lower T (None: theta_acc, as D.2 states)
    calib_step: float = 0.1                # T <- T*(1+eta) or T/(1+eta)
    calib_min_count: int = 3

    @classmethod
    def build(cls, params: dict[str, Any]) -> Options:
        opts = build_variant_options(cls, params, VARIANTS, canonical_variant, "DenoiseFlow")
        variant = opts.variant
        known = {method_name(v): v for v in VARIANTS}
        if opts.folder in known and known[opts.folder] != variant:
            raise ValueError(f"DenoiseFlow variant '{variant}' would write into the results folder of variant "
                             f"'{known[opts.folder]}' ({opts.folder}): select variants with "
                             f"denoiseflow.variant={variant}, not method.params.variant")
        return opts

    def validate(self) -> None:
        choices = {"entropy_norm": {"log_n", "log_k"}, "slot_agg": {"max_noisy_or", "max", "noisy_or", "mean"},
                   "step_uncertainty": {"support", "aligned_entropy"},
                   "propagation_combine": {"noisy_or", "max"}, "propagated_readout": {"max", "terminal"},
                   "fuse": {"mean", "noisy_or", "max"}, "calibration_form": {"power", "scale"},
                   "confidence_form": {"linear", "sigmoid"}, "thresholds": {"quantile", "fixed"},
                   "k_rule": {"interpolate", "linear", "clusters"}, "answer_clustering": {"key", "embedding"},
                   "correction": {"root_cause", "local_retry", "full_restart", "reexplore", "off"},
                   "refine_route_stage3": {"always", "on_fail"}, "reroute": {"branch", "single"},
                   "direct_on_fail": {"refine", "accept"}, "unrecovered_answer": {"original", "last"},
                   "refine_route_k": {"k_max"}, "embedder": {"minilm", "hash"}}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"DenoiseFlow option {name}={getattr(self, name)!r}: choose one of {sorted(allowed)}")
        if not (0 < self.t_min <= self.t_init <= self.t_max):
            raise ValueError("need 0 < t_min <= t_init <= t_max")
        if self.n_samples < 1 or self.k_max < 1:
            raise ValueError("n_samples and k_max must be >= 1")

    def resolved(self) -> dict[str, Any]:
        return asdict(self)


def method_name(variant: str) -> str:
    v = canonical_variant(variant)
    return "denoiseflow" if v == "full" else f"denoiseflow-{v}"
