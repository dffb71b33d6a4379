"""DenoiseFlow as a harness method: Sensing -> Regulating -> Correcting, with online calibration.

One problem is one "workflow": Stage 1 senses its uncertainty from N understanding samples, Stage 2
routes it (Direct / Branch / Refine) and selects a consensus answer, Stage 3 verifies and, on failure,
localises the root cause in the plan's dependency graph and re-executes from there. The calibration
temperature and the confidence history for the running-quantile thresholds live in
:class:`CalibrationState`, updated only at the runner's window boundaries (see ``end_window``).
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from typing import Any

import numpy as np

from agentic_repro.denoiseflow import prompts as P
from agentic_repro.denoiseflow.calibration import CalibrationState, observe_window
from agentic_repro.denoiseflow.config import Options, method_name
from agentic_repro.denoiseflow.correcting import boost, enforce, failing_slots, localize
from agentic_repro.denoiseflow.jsonfix import parse_json
from agentic_repro.denoiseflow.regulating import (branch_width, cluster_by_key, confidence, embedding_clusters, route,
                                    select_verified, thresholds)
from agentic_repro.denoiseflow.sensing import (DepGraph, build_graph, calibrate, cohesion, complexity_features, complexity_score,
                                 compound_risk, fuse, graph_risk, medoid, normalized_entropy, plan_steps,
                                 slot_aggregate, slot_value, step_uncertainty, threshold_clusters)
from agentic_repro.harness.context import ProblemContext
from agentic_repro.harness.types import Problem, Solution
from agentic_repro.harness.context import RunContext
from agentic_repro.harness.view import ProblemView


EMBED_INSTALL = "make install-embed  (or: pip install -e '.[embed]')"


def check_embedder(kind: str) -> None:
    """Fail before the run starts when the configured embedder cannot be built.

    Without it every problem would error in Stage 1; the run must stop with the install command
    instead. Cheap: looks the packages and the model folder up, loads nothing.
    """
    if kind != "minilm":
        return
    missing = [m for m in ("torch", "sentence_transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"DenoiseFlow needs the all-MiniLM-L6-v2 embedder (A.2), but {', '.join(missing)} "
                           f"is not installed: run `{EMBED_INSTALL}`")
    from agentic_repro.harness.embedding import model_dir

    try:
        model_dir()
    except RuntimeError as exc:
        raise RuntimeError(f"DenoiseFlow needs the all-MiniLM-L6-v2 embedder (A.2): {exc}") from exc


def _embedder_factory(kind: str):
    def make():
        if kind == "hash":
            from agentic_repro.harness.embedding import HashEmbedder

            return HashEmbedder()
        from agentic_repro.harness.embedding import default_embedder

        return default_embedder()
    return make


class _CountingEmbed:
    """Per-problem view of the run's embedder: counts this problem's embedding calls and texts."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.calls = 0
        self.texts = 0
        self.seconds = 0.0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        t0 = time.perf_counter()
        out = self.embedder.embed(texts)
        self.seconds += time.perf_counter() - t0
        return out


def _understanding_text(obj: dict[str, Any] | None, raw: str) -> str:
    if obj is None:
        return raw.strip()[:2000] or "(empty)"
    parts = []
    for k, v in obj.items():
        if isinstance(v, (list, dict)):
            v = json.dumps(v, ensure_ascii=False)
        parts.append(f"{k}: {v}")
    return "\n".join(parts)[:2000]


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


class DenoiseFlow:
    """The method object the runner builds from ``configs/method/denoiseflow.yaml``."""

    def __init__(self, **params: Any) -> None:
        self.opts = Options.build(params)
        check_embedder(self.opts.embedder)   # before the run starts, not once per problem
        self.name = method_name(self.opts.variant)
        self.window_size = self.opts.window_size
        self.state = CalibrationState(T=self.opts.t_init)

    async def preflight(self, ctx: RunContext) -> None:
        """Build the run's embedder and embed one text, so a broken install (e.g. a torch that fails to
        load) stops the run before any problem. ``ctx`` is the run context (it has ``resource``)."""
        emb = ctx.resource(f"embedder:{self.opts.embedder}", _embedder_factory(self.opts.embedder))
        await asyncio.to_thread(emb.embed, ["preflight"])

    # ---- stateful-method protocol (harness/runner.py) ----------------------------------------------
    def end_window(self, outcomes: list[tuple[Problem, Solution]]) -> None:
        records = []
        for problem, sol in outcomes:  # problem order, whatever order they finished in
            t = sol.trace or {}
            if "r" not in t:
                continue  # a problem that errored: no feedback
            records.append({"id": problem.id, "confidence": t.get("confidence"), "r": t.get("r"),
                            "passed": t.get("first_passed")})
        observe_window(self.state, records, self.opts)

    def state_dict(self) -> dict[str, Any]:
        return {"calibration": self.state.to_dict(), "variant": self.opts.variant, "options": self.opts.resolved()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("variant") not in (None, self.opts.variant):
            raise ValueError(f"method_state.json is for variant {state.get('variant')}, not {self.opts.variant}")
        self.state = CalibrationState.from_dict(state["calibration"])

    # ---- solve ----------------------------------------------------------------------------------
    async def solve(self, problem: ProblemView, ctx: ProblemContext) -> Solution:
        opts = self.opts
        T = self.state.T                              # frozen for the whole window
        history = list(self.state.confidences)
        bench = ctx.benchmark
        domain = bench.domain if bench.domain in ("math", "code", "qa") else "qa"
        rendered = bench.render(problem)
        emb = _CountingEmbed(ctx.resource(f"embedder:{opts.embedder}", _embedder_factory(opts.embedder)))
        slots = opts.slots_qa if domain == "qa" else opts.slots_math
        tr: dict[str, Any] = {"variant": opts.variant, "T": round(T, 6), "domain": domain}

        feats = complexity_features(rendered, domain)
        cx = complexity_score(feats, opts.complexity_weights, domain)
        tr["complexity"] = {"features": {k: round(v, 4) for k, v in feats.items()}, "score": round(cx, 4)}

        # ---------------- Stage 1: Sensing ----------------
        sense: dict[str, Any] | None = None
        if opts.semantic_anchoring:
            sense = await self._sense(problem, ctx, domain, rendered, emb, slots)
            u_fused = fuse(sense["u"], sense["u_graph"], opts)
            u_cal = calibrate(u_fused, T, opts.calibration_form)
            f_slot = slot_aggregate(sense["u_slots"], opts)
            r = compound_risk(u_cal, f_slot)
            tr.update({"u": _r(sense["u"]), "u_slots": {k: _r(v) for k, v in sense["u_slots"].items()},
                       "f_slot": _r(f_slot), "u_graph": _r(sense["u_graph"]), "u_fused": _r(u_fused),
                       "u_cal": _r(u_cal), "understanding": sense["summary"],
                       "graph": sense["graph"].to_dict() if sense["graph"] else None})
        else:  # w/o SA: the complexity signal is the only uncertainty estimate
            u_cal = calibrate(cx, T, opts.calibration_form)
            r = u_cal
            tr.update({"u": None, "u_slots": None, "f_slot": None, "u_graph": None, "u_fused": _r(cx),
                       "u_cal": _r(u_cal), "understanding": None, "graph": None})
        c = round(confidence(r, cx, opts), 6)  # the trace holds exactly what the history will hold
        tau_low, tau_high, tsrc = thresholds(history, opts)
        tr.update({"r": round(float(r), 6), "confidence": c,
                   "thresholds": {"low": _r(tau_low), "high": _r(tau_high), "source": tsrc}})

        # ---------------- Stage 2: Regulating ----------------
        initial = route(c, tau_low, tau_high)
        n_clusters = len(sense["clusters"]) if sense else 1
        if opts.fixed_k:
            rt, K = "branch", int(opts.fixed_k)
        elif not opts.adaptive_branching or initial == "direct":
            rt, K = "direct", 1
        elif initial == "refine":
            rt, K = "refine", opts.k_max
        else:
            rt, K = "branch", branch_width(c, tau_low, tau_high, n_clusters, opts)
        tr.update({"route_initial": initial, "route": rt, "K": K})

        texts, seeds = await self._execute(problem, ctx, domain, rendered, sense, K)
        chosen, consensus, verdicts = await self._consensus(problem, ctx, domain, rendered, sense, texts, emb)
        tr["branches"] = [{"seed": s, "answer": consensus["keys"][i], "cluster": consensus["cluster_of"][i],
                           "text_tail": texts[i][-300:]} for i, s in enumerate(seeds)]
        tr["consensus"] = consensus["scores"]
        tr["chosen_branch"] = chosen
        answer = texts[chosen]
        first = verdicts.get(chosen) or {"verdict": "UNKNOWN", "passed": None}
        tr["first_verdict"] = first
        tr["first_passed"] = first.get("passed")

        # ---------------- Stage 3: Correcting ----------------
        failed = first.get("passed") is False
        regime = rt == "refine" and opts.refine_route_stage3 == "always"   # §3.5: the Refine regime enters Stage 3
        want = opts.correction != "off" and (regime or (failed and (rt != "direct" or opts.direct_on_fail == "refine")))
        ref = {"triggered": bool(want), "attempts": [], "recovered": False,
               "trigger": None if not want else ("verification-failed" if failed else "refine-route")}
        if want:
            route_ctx = {"c": c, "r": float(r), "tau_low": tau_low, "tau_high": tau_high, "n_clusters": n_clusters,
                         "complexity": cx, "T": T, "regime": regime and not failed}
            answer, ref = await self._correct(problem, ctx, domain, rendered, sense, answer, first, slots, ref,
                                              route_ctx, emb)
        tr["refinement"] = ref
        tr["retries"] = len(ref["attempts"])      # flat aliases read by scripts/efficiency.py
        tr["risk"] = tr["r"]
        tr["final_passed"] = ref["attempts"][-1]["passed"] if ref["attempts"] else first.get("passed")
        tr["embedding"] = {"calls": emb.calls, "texts": emb.texts, "seconds": round(emb.seconds, 4),
                           "model": getattr(emb.embedder, "name", "?")}
        summ = ctx.summary()
        tr["cost"] = {"calls": summ.calls, "prompt_tokens": summ.prompt_tokens,
                      "completion_tokens": summ.completion_tokens, "cost_usd": summ.cost_usd,
                      "by_stage": summ.by_stage}
        return Solution(answer, confidence=c, trace=tr)

    # ---- Stage 1 ----------------------------------------------------------------------------------
    async def _sense(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str, emb: _CountingEmbed,
                     slots: list[str], *, stage: str = "sense", sample_offset: int = 0) -> dict[str, Any]:
        opts = self.opts
        if domain == "qa":
            context, question = P.qa_parts(problem, rendered)
            prompt = P.UNDERSTAND_QA.format(context=context, question=question)
        else:
            prompt = P.UNDERSTAND_MATH.format(problem_text=rendered)
        sampling: dict[str, Any] = {"temperature": opts.sample_temperature}
        if opts.sense_max_tokens:
            sampling["max_tokens"] = opts.sense_max_tokens
        outs = await ctx.generate([{"role": "user", "content": prompt}], stage=stage, n=opts.n_samples,
                                  sample_offset=sample_offset, **sampling)
        parsed = [parse_json(o.text) for o in outs]
        objs = [p[0] for p in parsed]
        status = [p[1] for p in parsed]
        utexts = [_understanding_text(o, out.text) for o, out in zip(objs, outs)]
        vecs = emb(utexts)
        clusters = threshold_clusters(vecs, opts.tau_sim)
        u = normalized_entropy([len(c) for c in clusters], opts.entropy_norm)
        meds = [medoid(vecs, c) for c in clusters]
        primary = meds[0]

        u_slots: dict[str, float] = {}
        slot_vals: dict[str, list[str]] = {}
        for s in slots:
            vals = [slot_value(o, s) for o in objs]
            slot_vals[s] = vals
            sv = emb(vals)
            u_slots[s] = normalized_entropy([len(c) for c in threshold_clusters(sv, opts.tau_sim)], opts.entropy_norm)

        # dependency graph over the primary understanding's plan (steps / hops)
        plans = [plan_steps(o, domain) for o in objs]
        # the plan of the primary understanding; if it has none (e.g. truncated JSON), the first plan found
        # in cluster order (medoids first); with no plan at all, one step standing for the whole problem
        order = [primary] + [m for c, med in zip(clusters, meds) for m in [med, *c] if m != primary]
        plan_of = next((i for i in order if plans[i]), None)
        steps = plans[plan_of] if plan_of is not None else [f"Solve: {rendered[:200]}"]
        step_vecs = emb(steps)
        others = [emb(p) for i, p in enumerate(plans) if p and i != plan_of]
        if others:
            u_local = step_uncertainty(step_vecs, others, opts)
        else:  # nothing to compare steps with: the global semantic entropy stands for each step
            u_local = [u] * len(steps)
        graph = build_graph(steps, step_vecs, u_local, opts)
        summary = {"n": len(outs), "parse": {k: status.count(k) for k in ("ok", "repaired", "malformed")},
                   "clusters": [len(c) for c in clusters], "cluster_members": clusters, "medoids": meds,
                   "primary": primary, "plan_from": plan_of}
        return {"objs": objs, "texts": utexts, "vecs": vecs, "clusters": clusters, "medoids": meds,
                "u": u, "u_slots": u_slots, "slot_values": slot_vals, "graph": graph,
                "u_graph": graph_risk(graph.u_prop, opts), "summary": summary}

    # ---- Stage 2: execution -------------------------------------------------------------------------
    def _solve_messages(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                        seed: dict[str, Any] | None, memory: str = "") -> list[dict[str, str]]:
        bench = ctx.benchmark
        analysis = P.analysis_block(seed, domain) if self.opts.solve_analysis else ""
        form = slot_value(seed, "answer_form") if seed else "null"
        form = form if form != "null" else {"math": "number", "code": "code", "qa": "short answer"}[domain]
        if domain == "math":
            text = P.SOLVE_MATH.format(problem_text=rendered, analysis=analysis, answer_form=form,
                                       answer_instruction=bench.answer_instruction)
        elif domain == "code":
            text = P.SOLVE_CODE.format(problem_text=rendered, analysis=analysis,
                                       function_signature=P.function_signature(problem, rendered),
                                       answer_instruction=bench.answer_instruction)
        else:
            context, question = P.qa_parts(problem, rendered)
            text = P.SOLVE_QA.format(context=context, question=question, analysis=analysis, answer_form=form,
                                     answer_instruction=bench.answer_instruction)
        return [{"role": "user", "content": text + memory}]

    def _seeds(self, sense: dict[str, Any] | None, K: int) -> list[tuple[str, dict[str, Any] | None]]:
        """E.4: primary medoid, second cluster's medoid (if >= 2 members), conservative variant; the rest
        are extra samples of the primary seed."""
        if sense is None:
            return [("plain", None)]
        objs, clusters, meds = sense["objs"], sense["clusters"], sense["medoids"]
        out: list[tuple[str, dict[str, Any] | None]] = [("primary", objs[meds[0]])]
        if K > 1 and len(clusters) > 1 and len(clusters[1]) >= 2:
            out.append(("alternative", objs[meds[1]]))
        if K > len(out):
            base = objs[meds[0]] or {}
            keep = {s for s, v in sense["u_slots"].items() if v <= self.opts.conservative_max_u}
            cons: dict[str, Any] = {}
            for k, v in base.items():
                if k == "outputs" and isinstance(v, dict):
                    sub = {kk: vv for kk, vv in v.items() if kk in keep}
                    if sub:
                        cons[k] = sub
                elif k in keep:
                    cons[k] = v
            out.append(("conservative", cons or None))
        return out[:K]

    async def _execute(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                       sense: dict[str, Any] | None, K: int, *, stage: str | None = None, sample_offset: int = 0,
                       memory: str = "", sampled: bool = False) -> tuple[list[str], list[str]]:
        """K solutions: one greedy call per distinct E.4 seed prompt, the rest sampled at
        ``solve_temperature_extra`` with distinct sample indices (identical prompts never repeat a
        greedy call). ``sampled``: every solution is sampled, from index ``sample_offset`` on (re-exploration)."""
        seeds = self._seeds(sense, K)
        stage = stage or ("solve" if K == 1 else "branch")
        msgs = [self._solve_messages(problem, ctx, domain, rendered, s, memory) for _, s in seeds]
        names = [n for n, _ in seeds]
        while len(msgs) < K:  # the rest: further samples of the primary seed
            msgs.append(msgs[0])
            names.append("sample")
        groups: dict[str, list[int]] = {}
        for i, m in enumerate(msgs):
            groups.setdefault(json.dumps(m), []).append(i)
        jobs, slots_of = [], []
        t_extra = self.opts.solve_temperature_extra
        for members in groups.values():
            m = msgs[members[0]]
            if sampled:
                jobs.append(ctx.generate(m, stage=stage, n=len(members), sample_offset=sample_offset,
                                         temperature=t_extra))
                slots_of.append(members)
                continue
            jobs.append(ctx.generate(m, stage=stage))
            slots_of.append(members[:1])
            if len(members) > 1:
                jobs.append(ctx.generate(m, stage=stage, n=len(members) - 1, sample_offset=sample_offset + 1,
                                         temperature=t_extra))
                slots_of.append(members[1:])
        res = await asyncio.gather(*jobs)
        texts = [""] * K
        for members, comps in zip(slots_of, res):
            for i, comp in zip(members, comps):
                texts[i] = comp.text
        return texts, names

    # ---- verification (G.3; code: public tests) ------------------------------------------------------
    async def _verify(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                      sense: dict[str, Any] | None, text: str) -> dict[str, Any]:
        bench = ctx.benchmark
        if domain == "code":
            res = await bench.run_public_tests(text, problem)
            if res is None or not res.get("total"):
                return {"verdict": "UNKNOWN", "passed": None, "reason": "no public tests", "source": "public-tests"}
            fails = [r for r in res["results"] if not r.get("passed")]
            reason = "; ".join(f"{r['test'][:150]} -> {r.get('status')} {str(r.get('error', ''))[-150:]}"
                               for r in fails[:3])
            ok = res["passed"] == res["total"]
            return {"verdict": "PASS" if ok else "FAIL", "passed": ok, "validity": res["passed"] / res["total"],
                    "reason": reason or "all public tests pass", "source": "public-tests",
                    "tests": f"{res['passed']}/{res['total']}"}
        form = "null"
        if sense is not None:
            form = slot_value(sense["objs"][sense["medoids"][0]], "answer_form")
        if domain == "math":
            prompt = P.VERIFY_MATH.format(problem_text=rendered, answer=text.strip()[-3000:],
                                          answer_form=form if form != "null" else "number")
        else:
            context, question = P.qa_parts(problem, rendered)
            extracted = None
            try:
                extracted = bench.extract(text, problem)[0]
            except Exception:  # noqa: BLE001
                pass
            prompt = P.VERIFY_QA.format(context=context, question=question,
                                        answer=str(extracted) if extracted else text.strip()[-1500:])
        out = (await ctx.generate([{"role": "user", "content": prompt}], stage="verify", temperature=0.0))[0].text
        obj, status = parse_json(out)
        verdict = None
        if obj is not None and isinstance(obj.get("verdict"), str):
            verdict = obj["verdict"].strip().upper()
        if verdict not in ("PASS", "FAIL"):
            up = out.upper()
            has_p, has_f = "PASS" in up, "FAIL" in up
            verdict = "PASS" if has_p and not has_f else "FAIL" if has_f and not has_p else "UNKNOWN"
            status = status if status != "ok" else "repaired"
        passed = True if verdict == "PASS" else False if verdict == "FAIL" else None
        v = {"verdict": verdict, "passed": passed, "parse": status, "source": "llm",
             "reason": str((obj or {}).get("reason", ""))[:400] if obj else out.strip()[:400]}
        if obj and isinstance(obj.get("checks"), dict):
            v["checks"] = obj["checks"]
        if obj and obj.get("confidence") is not None:
            try:
                v["confidence"] = float(obj["confidence"])
            except (TypeError, ValueError):
                pass
        return v

    # ---- consensus ---------------------------------------------------------------------------------
    async def _consensus(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                         sense: dict[str, Any] | None, texts: list[str], emb: _CountingEmbed
                         ) -> tuple[int, dict[str, Any], dict[int, dict[str, Any]]]:
        opts, bench = self.opts, ctx.benchmark
        keys: list[Any] = []
        for t in texts:
            try:
                keys.append(bench.answer_key(bench.extract(t, problem)[0]))
            except Exception:  # noqa: BLE001 - an unextractable answer is a None key
                keys.append(None)
        if len(texts) == 1:
            v = await self._verify(problem, ctx, domain, rendered, sense, texts[0]) \
                if (opts.verify_direct or domain == "code") else {"verdict": "UNKNOWN", "passed": None}
            return 0, {"keys": [None if keys[0] is None else str(keys[0])[:120]], "cluster_of": [0],
                       "scores": []}, {0: v}
        vecs = emb([t[-2000:] or "(empty)" for t in texts])
        if opts.answer_clustering == "embedding":
            kvecs = emb([str(k) if k is not None else "" for k in keys])
            clusters = embedding_clusters(kvecs, keys, opts.tau_sim)
        else:
            clusters = cluster_by_key(keys)
        reps = [medoid(vecs, c) for c in clusters]
        cohs = [cohesion(vecs, c, opts.singleton_cohesion) for c in clusters]
        first_batch = len(clusters) if domain == "code" else opts.max_verify_clusters
        bi, scores, verdict_of = await select_verified(
            clusters, reps, keys, cohs,
            lambda i: self._verify(problem, ctx, domain, rendered, sense, texts[reps[i]]), first_batch, opts)
        best = scores[bi]
        cluster_of = [0] * len(texts)
        for ci, c in enumerate(clusters):
            for m in c:
                cluster_of[m] = ci
        verdicts = {reps[i]: v for i, v in verdict_of.items()}
        return best.representative, {"keys": [None if k is None else str(k)[:120] for k in keys],
                                     "cluster_of": cluster_of, "scores": [s.to_dict() for s in scores],
                                     "chosen_cluster": bi}, verdicts

    # ---- Stage 3 ----------------------------------------------------------------------------------
    async def _correct(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                       sense: dict[str, Any] | None, answer: str, first: dict[str, Any], slots: list[str],
                       ref: dict[str, Any], rc_ctx: dict[str, Any], emb: _CountingEmbed) -> tuple[str, dict[str, Any]]:
        """At most R attempts, each verified. ``root_cause`` / ``local_retry``: G.4 refinement (root_cause:
        boost + enforce (E.5), then the root-cause step is re-routed: regenerated with K_after branches);
        ``reexplore`` (w/o CLR): a fresh K_max re-branch; ``full_restart``: a fresh Stage 1 and Stage 2
        with the failed attempt as Reflexion memory."""
        opts = self.opts
        graph: DepGraph | None = sense["graph"] if sense else None
        risk = {"u_local": list(graph.u) if graph else [], "u_prop": list(graph.u_prop) if graph else [],
                "u_slots": dict(sense["u_slots"]) if sense else {}, "r": rc_ctx["r"]}
        original, cur, ver = answer, answer, first
        for attempt in range(opts.max_retries):
            if attempt > 0 and ver.get("passed") is not False:
                break
            rec: dict[str, Any] = {"attempt": attempt + 1, "mode": opts.correction, "r_before": _r(risk["r"])}
            if attempt == 0 and rc_ctx.get("regime"):
                shown = dict(ver, verdict=f"{ver.get('verdict')} but low confidence (c = {rc_ctx['c']:.2f} < "
                                          f"tau_l = {rc_ctx['tau_low']:.2f}: Refine regime)")
            else:
                shown = ver
            if opts.correction == "full_restart":
                out, ver = await self._restart(problem, ctx, domain, rendered, slots, emb, cur, shown, attempt, rec)
            elif opts.correction == "reexplore":
                out, ver = await self._reexplore(problem, ctx, domain, rendered, sense, emb, attempt, rec)
            else:
                out, ver = await self._refine(problem, ctx, domain, rendered, sense, emb, cur, shown, slots,
                                              risk, rc_ctx, attempt, rec)
            rec.update({"verdict": ver.get("verdict"), "passed": ver.get("passed"),
                        "reason": str(ver.get("reason", ""))[:300], "text_tail": out[-300:]})
            ref["attempts"].append(rec)
            cur = out
        ref["recovered"] = bool(ref["attempts"]) and ver.get("passed") is True
        ref["retries"] = len(ref["attempts"])
        if ver.get("passed") is True:
            final = cur
        elif first.get("passed") is True:
            final = original   # Refine regime: the consensus had passed, the refinements did not
        else:
            final = cur if opts.unrecovered_answer == "last" else original
        ref["answer_from"] = "refined" if final is cur and ref["attempts"] and final is not original else "original"
        return final, ref

    async def _branch_select(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                             sense: dict[str, Any] | None, texts: list[str], emb: _CountingEmbed
                             ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(chosen text, its verdict, consensus summary) over candidate texts; one candidate is just verified."""
        if len(texts) == 1:
            v = await self._verify(problem, ctx, domain, rendered, sense, texts[0])
            return texts[0], v, {"K": 1}
        chosen, cons, verdicts = await self._consensus(problem, ctx, domain, rendered, sense, texts, emb)
        v = verdicts.get(chosen) or {"verdict": "UNKNOWN", "passed": None}
        return texts[chosen], v, {"K": len(texts), "keys": cons["keys"], "scores": cons["scores"],
                                  "chosen_branch": chosen}

    async def _refine(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                      sense: dict[str, Any] | None, emb: _CountingEmbed, cur: str, ver: dict[str, Any],
                      slots: list[str], risk: dict[str, Any], rc_ctx: dict[str, Any], attempt: int,
                      rec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """G.4 root-cause refinement (or Local Retry). With ``root_cause`` the boosted step is re-routed
        (E.5 changes what happens next): r_after gives c_after and the route; unless that is Direct, the step
        is regenerated with K_after branches (the Branch rule: #clusters, at least k_min, capped at K_max),
        selected by verified consensus."""
        opts, bench = self.opts, ctx.benchmark
        graph: DepGraph | None = sense["graph"] if sense else None
        rc = localize(graph, opts.correction, risk["u_prop"] or None)
        rec["root_cause"] = rc.to_dict()
        K_after = 1
        enforced_txt = ""
        if opts.correction == "root_cause" and graph is not None:
            risk["u_local"], risk["u_prop"] = boost(graph, risk["u_local"], rc.index, opts)
            fails = failing_slots(domain, ver, slots)
            risk["u_slots"] = enforce(risk["u_slots"], fails, opts)
            r_after = compound_risk(calibrate(fuse(sense["u"], graph_risk(risk["u_prop"], opts), opts),
                                              rc_ctx["T"], opts.calibration_form),
                                    slot_aggregate(risk["u_slots"], opts))
            risk["r"] = r_after
            c_after = confidence(r_after, rc_ctx["complexity"], opts)
            route_after = route(c_after, rc_ctx["tau_low"], rc_ctx["tau_high"])
            if opts.reroute == "branch" and route_after != "direct":
                # already in Stage 3: the re-executed step branches by the Branch rule (K = #clusters, capped)
                K_after = branch_width(c_after, rc_ctx["tau_low"], rc_ctx["tau_high"], rc_ctx["n_clusters"], opts)
            rec.update({"failing_slots": fails, "u_prop_after": [_r(x) for x in risk["u_prop"]],
                        "u_slots_after": {k: _r(v) for k, v in risk["u_slots"].items()}, "r_after": _r(r_after),
                        "c_after": _r(c_after), "route_after": route_after})
            flagged = [s for s, v in risk["u_slots"].items() if v >= opts.tau_enf]
            if flagged and opts.refine_enforced_slots:
                lines = []
                for s in flagged:
                    alts = list(dict.fromkeys(v for v in sense["slot_values"][s] if v != "null"))[:3]
                    lines.append(f"  - {s}: " + (" | ".join(a[:150] for a in alts) or "unclear"))
                enforced_txt = "- Uncertain aspects to re-check (readings seen):\n" + "\n".join(lines) + "\n"
        rec["K_after"] = K_after
        keep = ""
        if opts.refine_keep_steps and graph is not None and rc.index:
            keep = ("- Earlier steps that are not implicated (keep them):\n"
                    + "\n".join(f"  {i + 1}. {s[:200]}" for i, s in enumerate(graph.steps[:rc.index])) + "\n")
        step_no = "" if rc.index is None else f"step {rc.index + 1}: "
        prompt = P.REFINE.format(problem_text=rendered, previous_answer=cur.strip()[-3000:],
                                 verdict=ver.get("verdict"), failure_reason=ver.get("reason", ""),
                                 root_cause=f"{step_no}{rc.step[:300]}"
                                 + (" (highest influence on the failure)" if rc.method == "root_cause" else ""),
                                 step_description=rc.step[:300], keep=keep, enforced=enforced_txt,
                                 answer_instruction=bench.answer_instruction)
        msgs = [{"role": "user", "content": prompt}]
        jobs = [ctx.generate(msgs, stage="refine", temperature=0.0)]
        if K_after > 1:
            jobs.append(ctx.generate(msgs, stage="refine", n=K_after - 1, sample_offset=1,
                                     temperature=opts.solve_temperature_extra))
        res = await asyncio.gather(*jobs)
        texts = [c.text for r in res for c in r]
        out, v, cons = await self._branch_select(problem, ctx, domain, rendered, sense, texts, emb)
        if K_after > 1:
            rec["branches"] = cons
        return out, v

    async def _reexplore(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str,
                         sense: dict[str, Any] | None, emb: _CountingEmbed, attempt: int,
                         rec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """w/o CLR: no diagnosis; a failed verification falls back to a fresh re-branch with K_max
        sampled solutions (new sample indices each attempt), selected by verified consensus."""
        K = self.opts.k_max
        texts, _ = await self._execute(problem, ctx, domain, rendered, sense, K, stage="reexplore",
                                       sample_offset=1000 * (attempt + 1), sampled=True)
        out, v, cons = await self._branch_select(problem, ctx, domain, rendered, sense, texts, emb)
        rec["K_after"] = K
        rec["branches"] = cons
        return out, v

    async def _restart(self, problem: ProblemView, ctx: ProblemContext, domain: str, rendered: str, slots: list[str],
                       emb: _CountingEmbed, cur: str, ver: dict[str, Any], attempt: int,
                       rec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Full Restart (Reflexion-style): regenerate the whole solution from scratch: a fresh Stage 1
        (new understanding samples), fresh routing and branching, with the failed attempt and the verifier's
        reason as the Reflexion memory in every solution prompt. No root cause, no uncertainty reshaping."""
        opts = self.opts
        memory = "\n\n" + P.RESTART_MEMORY.format(previous_answer=cur.strip()[-3000:], verdict=ver.get("verdict"),
                                                  failure_reason=ver.get("reason", ""))
        sense = None
        if opts.semantic_anchoring:
            sense = await self._sense(problem, ctx, domain, rendered, emb, slots, stage="restart_sense",
                                      sample_offset=opts.n_samples * (attempt + 1))
        T = self.state.T
        feats = complexity_features(rendered, domain)
        cx = complexity_score(feats, opts.complexity_weights, domain)
        if sense is not None:
            r = compound_risk(calibrate(fuse(sense["u"], sense["u_graph"], opts), T, opts.calibration_form),
                              slot_aggregate(sense["u_slots"], opts))
        else:
            r = calibrate(cx, T, opts.calibration_form)
        c = confidence(r, cx, opts)
        tau_low, tau_high, _ = thresholds(list(self.state.confidences), opts)
        rt = route(c, tau_low, tau_high)
        n_clusters = len(sense["clusters"]) if sense else 1
        K = 1 if (rt == "direct" or not opts.adaptive_branching) else opts.k_max if rt == "refine" \
            else branch_width(c, tau_low, tau_high, n_clusters, opts)
        if opts.fixed_k:
            K = int(opts.fixed_k)
        texts, _ = await self._execute(problem, ctx, domain, rendered, sense, K, stage="restart", memory=memory)
        out, v, cons = await self._branch_select(problem, ctx, domain, rendered, sense, texts, emb)
        rec.update({"r_after": _r(r), "c_after": _r(c), "route_after": rt, "K_after": K, "branches": cons})
        return out, v
