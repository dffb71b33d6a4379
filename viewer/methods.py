"""Method-specific views of a problem's trace: DyFlow, DynaGraph, DenoiseFlow, AUQ.

Each reader picks the trace fields its method writes (dyflow/method.py, dynagraph/method.py,
denoiseflow/method.py, auq/method.py, auq/research.py) into a small view model the problem page renders. A trace a reader
does not recognise gets no special view; the page always shows the whole trace as JSON as well, so
nothing a method recorded is hidden by a view that does not know it.
"""
from __future__ import annotations

import json
from typing import Any

from agentic_repro.viewer import svg


def dyflow(trace: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(trace.get("stages"), list) or "designer_calls" not in trace and trace.get("method") != "dyflow":
        return None
    stages = []
    for st in trace["stages"]:
        spec = st.get("stage") or {}
        ops = spec.get("operators") or []
        executed = {e.get("output_key"): e for e in st.get("executed") or []}
        nodes = [{"id": o.get("output_key") or o.get("operator_id"), "label": o.get("template"),
                  "inputs": o.get("input_keys") or [], "title": o.get("instruction") or o.get("description"),
                  "status": "failed" if (executed.get(o.get("output_key")) or {}).get("error") else
                  "done" if o.get("output_key") in executed else "pending"} for o in ops]
        stages.append({"index": st.get("index"), "id": spec.get("stage_id"), "description": spec.get("description"),
                       "status": st.get("status"), "summary": st.get("summary"), "attempts": st.get("attempts") or [],
                       "executed": st.get("executed") or [], "outputs": st.get("outputs") or {},
                       "notice": st.get("notice"), "loop_warning": st.get("loop_warning"),
                       "graph": svg.dag(nodes) if nodes else None})
    return {"kind": "dyflow", "stages": stages,
            "facts": {k: trace.get(k) for k in ("terminated_by", "n_stages", "designer_calls", "final_key",
                                                "answer_from", "operators_used", "counts", "errors")}}


def dynagraph(trace: dict[str, Any]) -> dict[str, Any] | None:
    if not isinstance(trace.get("plans"), list) or "topology_history" not in trace:
        return None
    graph = trace.get("graph") or {}
    nodes = [{"id": n.get("id"), "label": n.get("expert"), "inputs": n.get("inputs") or [],
              "status": n.get("status"), "title": f"{n.get('origin')}: {n.get('subtask')}"}
             for n in graph.get("nodes") or []]
    return {"kind": "dynagraph", "graph": svg.dag(nodes) if nodes else None, "nodes": graph.get("nodes") or [],
            "history": trace.get("topology_history") or [], "plans": trace["plans"],
            "events": trace.get("events") or [], "executions": trace.get("executions") or [],
            "facts": {k: trace.get(k) for k in ("variant", "nodes_executed", "patches", "reconstructions",
                                                "plan_legal_first_try", "fallback_plan", "reasks", "fallbacks",
                                                "fallback_patches", "stopped", "confidence")}}


def denoiseflow(trace: dict[str, Any]) -> dict[str, Any] | None:
    if "route" not in trace or "u_slots" not in trace:
        return None
    pick = lambda *ks: {k: trace.get(k) for k in ks if k in trace}
    und = trace.get("understanding") or {}
    g = trace.get("graph") or {}
    steps, u, up = g.get("steps") or [], g.get("u") or [], g.get("u_prop") or []
    inputs: dict[int, list[str]] = {}
    for e in g.get("edges") or []:
        if isinstance(e, (list, tuple)) and len(e) >= 2:
            inputs.setdefault(int(e[1]), []).append(f"s{int(e[0]) + 1}")
    at = lambda xs, i: f"{xs[i]:.2f}" if i < len(xs) and isinstance(xs[i], (int, float)) else "—"
    nodes = [{"id": f"s{i + 1}", "label": f"u={at(u, i)} → {at(up, i)}", "inputs": inputs.get(i, []),
              "title": str(text), "status": "done"} for i, text in enumerate(steps)]
    return {"kind": "denoiseflow", "steps": steps, "step_graph": svg.dag(nodes) if nodes else None,
            "edges": g.get("edges") or [],
            "sense": pick("domain", "complexity", "u", "u_slots", "f_slot", "u_graph", "u_fused", "u_cal", "T"),
            "regulate": pick("confidence", "thresholds", "route_initial", "route", "K", "r", "risk"),
            "correct": pick("chosen_branch", "consensus", "first_verdict", "first_passed", "refinement", "retries",
                            "final_passed"),
            "clusters": und.get("clusters"), "members": und.get("cluster_members"), "medoids": und.get("medoids"),
            "primary": und.get("primary"), "branches": trace.get("branches") or []}


def research_rows(rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AUQ research (auq/research.py) records no episode: its steps are the planner's ``rounds``, each the plan
    the researchers got, its confidence and explanation, and the System 1/2 record (the planner's calls)."""
    rows = []
    for i, r in enumerate(rounds):
        a = r.get("auq") or {}
        s1 = a.get("system1") or {}
        plan = json.dumps(r.get("queries"), ensure_ascii=False) if r.get("queries") is not None else None
        notes = "\n\n".join(str(n) for n in r.get("notes") or []) or None
        rows.append({"step": r.get("round", i + 1), "action": plan, "observation": notes, "reward": None,
                     "confidence": r.get("confidence"),
                     "status": "fallback: researched the task text" if r.get("fallback_plan")
                     else (s1.get("confidence_status") if r.get("confidence") is None else None),
                     "explanation": r.get("explanation"), "system2": bool(a.get("system2")),
                     "trigger": a.get("trigger"), "c_init": a.get("c_init"), "c_final": a.get("c_final"),
                     "calls": 1 + int(a.get("calls_system2") or 0) if a else None, "detail": a or None,
                     "raw": s1.get("raw")})
    return rows


def auq(trace: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any] | None:
    steps = [e for e in events if e.get("event") == "step"]
    if not steps and "system2_triggers" not in trace:
        return None
    research = not steps and isinstance(trace.get("rounds"), list)
    rows = research_rows(trace["rounds"]) if research else []
    for e in steps:
        extra = e.get("extra") or {}
        a = extra.get("auq") or {}
        conf = extra.get("confidence")
        rows.append({"step": e.get("step"), "action": e.get("action"), "observation": e.get("observation"),
                     "reward": e.get("reward"), "confidence": conf, "status": extra.get("confidence_status"),
                     "explanation": extra.get("explanation"), "system2": bool(a.get("system2")),
                     "trigger": a.get("trigger"), "c_init": a.get("c_init"), "c_final": a.get("c_final"),
                     "calls": extra.get("calls"), "detail": a or None, "raw": extra.get("raw")})
    tau = trace.get("tau")
    points = [(r["c_init"] if r["c_init"] is not None else r["confidence"],
               r["c_final"] if r["c_final"] is not None else r["confidence"], r["system2"]) for r in rows]
    return {"kind": "auq", "steps": rows, "tau": tau, "curve": svg.curve(points, tau=tau), "research": research,
            "facts": {k: trace.get(k) for k in ("agent", "variant", "tau", "system2_triggers", "expansions",
                                                "missing_confidence_steps", "missing_confidence_rounds",
                                                "fallback_plans", "closed_book")},
            "episodes": trace.get("episodes") or []}


def views(trace: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every method view that recognises ``trace`` (usually one, none for single-call methods)."""
    if not isinstance(trace, dict):
        return []
    out = [v for v in (dyflow(trace), dynagraph(trace), denoiseflow(trace), auq(trace, events)) if v]
    return out
