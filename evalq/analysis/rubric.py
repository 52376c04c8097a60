"""RUBRIC.md for rater packets, from the blinded-review protocol's outcome definitions.

The protocol asks for a written definition, decision rule and examples per binary outcome and
says how each one is used; the definitions below are its words, and the decision rules and
examples are left for the study owner to write and freeze before any scoring starts.
"""

from __future__ import annotations

from evalq.analysis.runs import RATER_FIELDS

#: (definition, what the analysis does with it), per rater field, from the protocol.
DEFINITIONS = {
    "passed": ("The run meets the task's frozen acceptance criteria.",
               "Task Pass Rate (TPR, primary H1) and Reliable Pass@k (RP@k, primary H2); "
               "Clean Pass Rate (CPR)."),
    "validation_passed": ("The task's validation commands (the public checks shown to both "
                          "conditions) pass on the final workspace.",
                          "Clean Pass Rate (CPR); kept for audit and reliability checks."),
    "human_accepted": ("A reviewer would accept the change as delivered, without asking for "
                       "changes.", "Audit and reliability checks only; not a comparison metric."),
    "regression": ("The change breaks behaviour unrelated to the task (a human-scored unrelated "
                   "regression).", "Regression-Free Rate (RFR, primary H3, together with the "
                   "locked hidden checks) and CPR."),
    "rework_required": ("The change needs a repair pass before it could be merged.",
                        "No-Rework Rate (NRR, secondary H5) and CPR."),
    "requirements_traceability": ("The handoff links each requirement to the change and to a "
                                  "test (the presence of links, not their correctness).",
                                  "Secondary; audit and reliability checks only."),
}
assert tuple(DEFINITIONS) == RATER_FIELDS


def render_rubric(study_id: str) -> str:
    """The RUBRIC.md template: definitions filled in, decision rules and examples to write."""
    lines = [f"# Scoring rubric: {study_id}", "",
             "Read this before scoring any packet. Score only what the packet shows; you are "
             "not told which condition produced it, and guessing it is not part of the task.",
             "", "Each outcome is true or false. Leave it null only when the packet cannot "
             "decide it (say why in your notes); null is never read as false.", "",
             "The study owner fills in every decision rule and example below and freezes this "
             "file before scoring starts; changing it after seeing outcomes needs a new, "
             "pre-registered scoring round.", ""]
    for field in RATER_FIELDS:
        definition, use = DEFINITIONS[field]
        lines += [f"## `{field}`", "", f"- Definition: {definition}", f"- Used for: {use}",
                  "- Decision rule: TO BE WRITTEN before scoring (what makes it true, what "
                  "makes it false, what to do in the borderline case).",
                  "- Example true: TO BE WRITTEN.", "- Example false: TO BE WRITTEN.", ""]
    lines += ["## Recording scores", "",
              "One row per packet in raters.template.jsonl: your rater_id and the six fields. "
              "Do not score a run you executed yourself.", ""]
    return "\n".join(lines)
