"""DynaGraph options and the Table 2 variants. Every option the paper does not fix is named here and listed
with its source in dynagraph/README.md; ``Options.resolved()`` is recorded in every prediction's trace."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from agentic_repro.harness.options import build_variant_options

VARIANTS: dict[str, dict[str, Any]] = {
    "full": {},
    "wo_patching": {"patching": False},
    "wo_reconstruction": {"reconstruction": False},
}
_ALIASES = {"w/o patching": "wo_patching", "w/o_patching": "wo_patching", "no_patching": "wo_patching",
            "w/o reconstruction": "wo_reconstruction", "w/o_reconstruction": "wo_reconstruction",
            "no_reconstruction": "wo_reconstruction"}

CHOICES = {
    "uncertainty": {"mean", "min", "noisy_or", "last"},
    "suspend_rule": {"any", "local_only"},
    "evidence": {"closed_book", "bm25", "tool"},
    "fallback": {"use", "error"},
    "cost_form": {"sqrt", "log", "linear"},
}


def canonical_variant(name: str) -> str:
    key = _ALIASES.get(str(name).strip().lower(), str(name).strip().lower())
    if key not in VARIANTS:
        raise ValueError(f"unknown DynaGraph variant {name!r}; choose one of {sorted(VARIANTS)}")
    return key


def method_name(variant: str) -> str:
    v = canonical_variant(variant)
    return "dynagraph" if v == "full" else f"dynagraph_{v}"


@dataclass
class Options:
    variant: str = "full"
    patching: bool = True                 # fine-grained patching operator (Table 2: w/o patching)
    reconstruction: bool = True           # subgraph reconstruction operator (Table 2: w/o reconstruction)
    # paper §4.1
    temperature: float = 0.7
    top_p: float = 0.9
    tau_c: float = 0.35
    tau_u: float = 0.45
    # forms the paper does not fix (README: "Choices the paper leaves open")
    uncertainty: str = "mean"             # U_t = 1 - mean c | 1 - min c | 1 - prod c (noisy_or) | 1 - c_last
    suspend_rule: str = "any"             # any: xi=1 or c<tau_c or U_t>=tau_u (supplement §1.2); local_only: no U_t
    missing_confidence: float = 0.0       # c when an expert gives no valid confidence
    # budgets
    max_plan_attempts: int = 3            # planner answers per (re)plan before the fallback plan
    max_plan_nodes: int = 6               # nodes one plan may have
    max_patches: int = 3                  # patch nodes per problem
    max_reconstructions: int = 2          # subgraph reconstructions per problem
    max_nodes: int = 14                   # node executions per problem (patches and subgraphs included)
    fallback: str = "use"                 # use: the labelled 2-node plan (E_logic -> E_expr) runs, counted per
                                          # problem and shown in every table cell | error: the problem is an error
    # E_rag's evidence
    evidence: str = "closed_book"         # closed_book | bm25 (local index over `corpus`) | tool (benchmark/web tool)
    corpus: str | None = None             # bm25: a .jsonl ({"title"?, "text"}) or .txt (one passage a line)
    evidence_k: int = 3
    evidence_tool: str = "search"         # tool: the tool's name in ctx.tools
    # generation
    max_tokens_plan: int | None = 512
    max_tokens_expert: int | None = 512
    # modules: which role each module calls (configs/method/dynagraph.yaml declares their slots; bind adapters with
    # roles.<r>.adapter)
    role_plan: str = "planner"
    role_rag: str = "expert1"
    role_logic: str = "expert2"
    role_expr: str = "expert3"
    # plan sampling for critic-guided DPO (dynagraph/train): >1 = sample this many plans and execute each
    plan_samples: int = 1
    folder: str | None = None

    @classmethod
    def build(cls, params: dict[str, Any]) -> Options:
        params = dict(params)
        if "on_plan_failure" in params:       # the option's earlier name (fallback | error)
            old = params.pop("on_plan_failure")
            params.setdefault("fallback", "use" if old == "fallback" else old)
        return build_variant_options(cls, params, VARIANTS, canonical_variant, "DynaGraph")

    def validate(self) -> None:
        for name, allowed in CHOICES.items():
            if name in {f.name for f in fields(self)} and getattr(self, name) not in allowed:
                raise ValueError(f"DynaGraph option {name}={getattr(self, name)!r}: choose one of {sorted(allowed)}")
        if self.evidence == "bm25" and not self.corpus:
            raise ValueError("DynaGraph evidence=bm25 needs method.params.corpus=<a .jsonl or .txt corpus>")
        for k in ("max_plan_attempts", "max_plan_nodes", "max_nodes", "plan_samples"):
            if getattr(self, k) < 1:
                raise ValueError(f"DynaGraph option {k} must be >= 1")
        if not (0 <= self.tau_c <= 1 and 0 <= self.tau_u <= 1):
            raise ValueError("tau_c and tau_u must lie in [0, 1]")

    def resolved(self) -> dict[str, Any]:
        return asdict(self)

    def role(self, module: str) -> str:
        return {"plan": self.role_plan, "E_rag": self.role_rag, "E_logic": self.role_logic,
                "E_expr": self.role_expr}[module]
