"""DyFlow's prompts, verbatim from the authors' release (wyf23187/DyFlow @ fa6d828).

Transcribed in ``../shared/papers/dyflow-supplement.md`` §1-§3 and checked against the release's
source: the designer prompt (``dyflow/core/workflow.py`` ``DESIGN_STAGE_PROMPT``, rendered: the
release's doubled braces are single here), the stage-count notices, the loop warning, the operator
templates (``dyflow/core/operator.py`` ``PROMPT_TEMPLATES``), the ensemble adjudicator, the state
summariser (``dyflow/core/state.py``) and the task suffixes (``scripts/run_dataset.py``). Slots are
filled with :func:`fill` (plain replacement, so braces inside a task never break a template).

What is ours (no released text exists) is marked OURS: the re-ask message after an invalid stage,
the one-stage instruction of the w/o-dynamic-planning ablation, the catalogue entries of the Table 6
templates the release lacks (``operator_catalogue: paper``), and the error lines of the summary.
"""
from __future__ import annotations


def fill(template: str, **slots: str) -> str:
    """Replace ``{name}`` slots; no other brace is touched."""
    for k, v in slots.items():
        template = template.replace("{" + k + "}", v)
    return template

# dyflow/core/workflow.py DESIGN_STAGE_PROMPT (rendered); slots {problem_description}, {state_summary}
DESIGN_STAGE_PROMPT = """
You are the workflow stage designer. Analyze the current execution state and design the next stage dynamically.

Original Problem:
{problem_description}

Current Execution Summary:
{state_summary}

# Available Operators and When to Use

Strategy Selection Guidelines:
- Assess problem complexity in the first stage and choose an appropriate initial strategy
- Adapt strategy based on execution results
- Prefer diverse strategies: if review failed, try DECOMPOSE or ENSEMBLE instead

1. DECOMPOSE_PROBLEM
   Purpose: Break down a complex problem into smaller, manageable sub-goals.
   Output: List of ordered sub-goals.

2. GENERATE_PLAN
   Purpose: Create a strategic solving approach or outline before generating the solution.
   Output: Step-by-step plan.

3. GENERATE_ANSWER
   Purpose: Generate a complete solution with step-by-step reasoning or calculations.
   Output: Full solution text with reasoning or code implementation.

4. REFINE_ANSWER
   Purpose: Improve an existing solution based on review feedback or identified issues.
   Output: Improved solution text.

5. SELF_CONSISTENCY_ENSEMBLE
   Purpose: Generate multiple independent solutions (3-5 solutions) and select the best by majority vote.
   Output: Ensemble of solutions + selected best answer.

6. REVIEW_SOLUTION
   Purpose: Critically evaluate a solution for correctness, soundness, and completeness.
   Output: Review details + "Overall Verdict: accept/minor_issues/major_issues/reject"

7. TEST_CODE
   Purpose: Extract and execute Python code from a code problem solution to verify it runs correctly.
   Output: Execution status (success/failure) and result.

8. ORGANIZE_SOLUTION
   Purpose: Format the final answer and TERMINATE the workflow.
   Output format requirements:
   - For coding problems: ONLY the function implementation in a python block - NO assertions, NO test cases, NO example code

Design Rules

1. Stage Structure:
   - Typical stage: 3-4 operators working together to achieve an intermediate goal
   - Termination stage: If the solution is validated, design a NEW SEPARATE stage containing ONLY ORGANIZE_SOLUTION
   - NEVER mix ORGANIZE_SOLUTION with other operators in the same stage
   - Maximum 7 stages total

2. Naming Conventions:
   - Stage IDs: Increase monotonically (e.g., "stage_1", "stage_2", "stage_3")
   - Operator IDs: Format "op_<stageNum>_<index>" (e.g., "op_3_1", "op_3_2")
   - Output keys: Use exact keys from the summary (e.g., "act_0", "act_5"), never invent new ones

3. Input Keys:
   - Always reference existing output_key names from the summary
   - Use them as input_keys to pass data between operators
   - Example: If summary shows "act_2" was generated, use "act_2" in input_keys
   - For any operator that needs the problem statement (GENERATE_* / DECOMPOSE / etc.), you must include "original_problem" in input_keys. 
   - On the first solving stage, always pass original_problem to the executor so it can see the question.

4. Input Usage Field:
   - Explain how to use each input_key's data for this operator

Output Format:
Return valid JSON in this structure:

{
  "stage_id": "stage_N",
  "stage_description": "One-sentence description of what this stage accomplishes",
  "operators": [
    {
      "operator_id": "op_N_1",
      "operator_description": "What this specific operator does",
      "params": {
        "instruction_type": "OPERATOR_NAME",
        "input_keys": ["key1", "key2"],
        "output_key": "act_X",
        "input_usage": "How to use the input_keys data"
      }
    },
    ... (add more operators as needed - typically 3-4 per stage)
  ]
}
"""

# appended when >= 4 stages exist ("this will be stage 5"); slot {n} = current_stage_count + 1
NOTICE_CONSTRAINT = """

Constraint: This will be stage {n}. The workflow has a maximum iteration limit of 6-7 stages. To ensure successful termination, include ORGANIZE_SOLUTION in this stage.
"""
# appended (instead) when >= 6 stages exist
NOTICE_TERMINATE = """

Termination Required: This is stage {n}. The workflow must terminate at this iteration to avoid exceeding the maximum allowed stages. Include ORGANIZE_SOLUTION in this stage. If no solution has been accepted, use SELF_CONSISTENCY_ENSEMBLE followed by ORGANIZE_SOLUTION to output the best available result.
"""

# workflow.py: set when each of the last 3 stages contained REVIEW_SOLUTION
LOOP_WARNING = ("LOOP DETECTED: Last 3 stages each ran REVIEW_SOLUTION. Switch strategy "
                "(e.g., SELF_CONSISTENCY_ENSEMBLE or DECOMPOSE_PROBLEM).")

# dyflow/core/operator.py PROMPT_TEMPLATES; slots {context}, {guidance}
OPERATOR_PROMPTS: dict[str, str] = {
    "GENERATE_ANSWER": """You are an expert problem solver. Think step by step to solve the problem using the context and guidance.

Context:
{context}

Guidance:
{guidance}

Instructions:
- For reasoning problems: provide step-by-step reasoning and final answer
- For coding problems: include Python code in ```python blocks
- Show complete reasoning or code logic

Output Format:
<your_solution_with_reasoning_and_or_code>""",
    "REVIEW_SOLUTION": """You are a careful reviewer trained to detect logical and mathematical errors. Your job is to critically evaluate the solution for correctness, soundness, and completeness — not just surface structure.

Context:
{context}

Guidance:
{guidance}

Instructions:
- You should try to find mistakes at every step of the given answer.
- You should bring the given answer into the original question to check if there is anything that does not meet the question setting.


Output Format:
Review Details: <step-by-step review>
Overall Verdict: <accept/minor_issues/major_issues/reject>
""",
    "DECOMPOSE_PROBLEM": """You are an expert in decomposing problems. Break down the original problem into clearly defined, structured sub-tasks.

Context:
{context}

Guidance:
{guidance}

Instructions:
- Clearly outline each distinct sub-task.
- Do not attempt to solve any sub-task.
- Maintain logical completeness.
- Decompose the problem into 2-4 steps at most.

Output:
<your_decomposed_problem>""",
    "GENERATE_PLAN": """You are an expert in generating step-by-step executable plans. Generate a step-by-step executable plan to approach the given problem.

Context:
{context}

Guidance:
{guidance}

Instructions:
- Clearly number each step.
- Ensure each step is actionable and logically sequenced.
- Do not solve the problem here, only provide the plan.
- Give 2-4 steps at most.

Output Format:
Solution Plan:
<step_id>: <description>
<step_id>: <description>""",
    "REFINE_ANSWER": """You are an expert in refining answers. Refine the existing answer based on context and guidance.

Context:
{context}

Guidance:
{guidance}

Output Format:
Answer: <your refined answer>""",
    "ORGANIZE_SOLUTION": """You are an expert in organizing solutions. Clearly organize the final solution for presentation based on the provided context and guidance.

Context:
{context}

Guidance:
{guidance}

Instructions:
- Clearly present final reasoning steps and results.
- Ensure alignment with the problem's required formatting.
- Omit irrelevant or incorrect previous attempts.
- This is the FINAL output - the workflow will terminate after this.

Output:
<your_organized_solution>""",
    "SELF_CONSISTENCY_ENSEMBLE": """You are an expert problem solver. Generate ONE complete solution using a DISTINCT reasoning approach.

Context:
{context}

Guidance:
{guidance}

IMPORTANT Instructions:
- Use a unique logical approach (this is one member of an ensemble run in parallel).
- Think step-by-step and show the full chain of reasoning.
- Provide the final answer in the exact format the task requires.

Output:
<your_solution_with_final_answer>""",
    "DEFAULT": """You are an expert in executing actions strictly according to the given context and guidance.

Context:
{context}

Guidance:
{guidance}

Instructions:
- Follow every detail of the instructions carefully.
- Ensure output exactly matches the requested format.

Output:
<your_output>""",
}

# operator.py, SELF_CONSISTENCY_ENSEMBLE's selector (temperature 0.0); slots {context_block}, {guidance_block}, {solutions_formatted}
ENSEMBLE_SELECTOR = """You are an impartial adjudicator comparing multiple candidate solutions to the same task.
First, identify which solutions reach the same conclusion (majority consensus).
Then select one solution from the majority group - choose the one with the clearest reasoning.
If there is no clear majority, select the single solution that is most likely correct and logically sound.

Problem Context:
{context_block}

Guidance for the task:
{guidance_block}

Candidate solutions:
{solutions_formatted}

Respond strictly in JSON with keys 'selected_index' (1-based integer), 'justification', and optional 'confidence' (0-1).
"""

# dyflow/core/state.py get_state_summary_for_designer; slot {stage_raw_info}
SUMMARY_PROMPT = """You are summarizing a workflow stage execution. Extract and report ONLY the information that actually exists.

=== INPUT FORMAT ===
The stage information contains actions in this format:
- "##stage_X##: Solution output key: <action_id>:" (for solutions)
- "##stage_X##: Review output key: <action_id>:" (for reviews)

=== YOUR TASK ===
1. Find each "output key: <action_id>" and extract the exact action ID
2. Summarize what each action did based on its instruction type and content
3. For REVIEW_SOLUTION actions: Extract verdict from "Overall Verdict:" (accept/reject/minor_issues/major_issues)
4. For TEST_CODE actions: Extract execution result (Success/Failure)
5. Extract final answer if present

=== OUTPUT FORMAT ===
- Stage goal: <one sentence>
- Actions executed:
  • <action_id> (<instruction_type>): <brief description>
  • <action_id> (<instruction_type>): <brief description>
- Review verdict: <verdict keyword> (only if REVIEW_SOLUTION present)
- Execution result: <Success/Failure details> (only if TEST_CODE present)
- Final Answer: <answer> (only if present)

=== CRITICAL RULES ===
1. One operator = one action = one output key (DO NOT create multiple IDs like act_1, act_2, act_3 from one operator)
2. Copy the EXACT action ID you see after "output key:" (e.g., "output key: act_1" → use "act_1")
3. DO NOT invent, number, or modify action IDs
4. If stage has 1 action, list 1 action; if stage has 2 actions, list 2 actions

=== STAGE INFORMATION ===
{stage_raw_info}
"""

FIRST_STAGE_SUMMARY = "No previous stages executed yet. This is the first stage."

# scripts/run_dataset.py §3.2: HumanEval code extraction of the final answer; slots {question}, {final_answer}
CODE_EXTRACTION = """You are given:
- A partial or original function definition, which may be incomplete or missing logic.
- A complete working solution, possibly with different function names or wrapped inside another function like solve().

Your task is to:
- Reconstruct the full, correct version of the original function(s) using the logic from the complete solution. Even the entry point is not same.
- Preserve the original function names and signatures from the partial code.
- Include all necessary imports.
- Move everything to the global scope (no solve() wrapper).
- Output a single, clean Python code block with the complete implementation and without main entry point and any test cases.

Here is the input:
Original function definition:
{question}

Complete working solution:
{final_answer}
"""

# scripts/run_dataset.py task suffixes: the designer's {problem_description} is question + "\n\n" + suffix.
# MATH's release string reaches the model as "\boxed{{}}" (it is substituted, never formatted); we send
# "\boxed{}" (README, deviations).
SUFFIX_MATH = "Let's think step by step to solve the problem. Please output your answer in \\boxed{}."
SUFFIX_REASONING = "Let's think step by step to solve the problem."   # LiveBench, PubMedQA, SocialMaze
SUFFIX_CODE = ("Let's work out this problem and return all the imports and function in the final answer in a "
               "python code block. You can generate Assertions from the examples to test the function. You "
               "should not raise ValueError in your final function code.")   # run_workflow_code (HumanEval)

# OURS: sent (as a user turn after the designer's invalid reply) when a stage fails validation.
REASK = ("Your stage design could not be used: {error}\n"
         "Return the corrected stage as ONE valid JSON object in the Output Format above, and nothing else.")

# OURS: the w/o-dynamic-planning ablation (paper §4.3: "we prompt DyPlanner to complete the entire problem
# in a single reasoning stage without receiving intermediate feedback"), appended to the designer prompt.
SINGLE_STAGE = ("\n\nSingle-stage mode: design ONE stage that solves the whole problem from start to finish. "
                "There is no later stage and no feedback. In this mode the stage must END with ORGANIZE_SOLUTION "
                "(it may follow the other operators in the same stage), which outputs the final answer.")

# OURS: error lines appended to the summary z_t (paper §3.1: s_t holds "any encountered errors"; the
# release logs them in State.error_log but never shows them to the designer).
ERRORS_HEADER = "Errors so far:"

# OURS: operator_catalogue=paper lists the paper's Table 6 templates (App. C.1 descriptions) in the
# released prompt's format instead of the release's eight; the rest of the designer prompt is unchanged.
_PAPER_ORDER = ["DECOMPOSE_PROBLEM", "GENERATE_PLAN", "GENERATE_ANSWER", "REFINE_ANSWER", "GENERATE_CODE",
                "REFINE_CODE", "ENSEMBLE", "REVIEW_SOLUTION", "ORGANIZE_SOLUTION", "DEFAULT", "TERMINATE"]
_PAPER_EXTRA = {
    "REVIEW_SOLUTION": '   Output: Review details + "Overall Verdict: accept/minor_issues/major_issues/reject"\n',
    "ENSEMBLE": "   Output: Ensemble of solutions + selected best answer.\n",
    "ORGANIZE_SOLUTION": ("   Output format requirements:\n"
                          "   - For coding problems: ONLY the function implementation in a python block - NO "
                          "assertions, NO test cases, NO example code\n"),
    "TERMINATE": "   Output: The answer of its first input key becomes the final answer.\n",
}


def paper_catalogue_prompt() -> str:
    """DESIGN_STAGE_PROMPT with the operator list replaced by Table 6 (see above)."""
    from agentic_repro.dyflow.schema import PAPER_TEMPLATES

    head, rest = DESIGN_STAGE_PROMPT.split("1. DECOMPOSE_PROBLEM", 1)
    _, tail = rest.split("Design Rules", 1)
    items = []
    for i, name in enumerate(_PAPER_ORDER, 1):
        items.append(f"{i}. {name}\n   Purpose: {PAPER_TEMPLATES[name]}\n{_PAPER_EXTRA.get(name, '')}")
    body = "\n".join(items).replace("Summarize or structure the final answer for output.",
                                    "Summarize or structure the final answer for output and TERMINATE the "
                                    "workflow.")
    return head + body + "\nDesign Rules" + tail
