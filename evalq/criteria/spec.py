"""What a fixture declares: its criteria and the trace rule language (frozen in its digest).

A trace rule is data, never code: it counts the trajectory events that match a pattern (a
tool call by name glob, words its arguments or a message contain, whether the call failed),
and combines such counts with `all` and `any`. Matching is by substring and glob only, no
regular expressions, so checking a rule costs time linear in the agent's text and nothing the
agent writes can stall a grader.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the rater fields a review criterion may name (the rubric's binary outcomes)
REVIEW_FIELDS = ("passed", "validation_passed", "human_accepted", "regression",
                 "rework_required", "requirements_traceability")
EVENTS = ("tool_call", "message", "final_message")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TraceRule(_Strict):
    """Either a match (`event` and its filters, counted against `min_count`/`max_count`) or a
    combination (`all` / `any` of rules). `max_count = 0` says "never"."""

    event: Optional[Literal["tool_call", "message", "final_message"]] = None
    #: glob over the tool's name, case-insensitive ("skill", "bash", "web*")
    tool: Optional[str] = Field(None, min_length=1)
    #: the call's arguments (as JSON text) or the message must contain one of these, any case
    contains: Optional[list[str]] = Field(None, min_length=1)
    #: and none of these
    excludes: Optional[list[str]] = None
    #: True: only calls whose result was no error; False: only failed calls
    succeeded: Optional[bool] = None
    min_count: int = Field(1, ge=0)
    max_count: Optional[int] = Field(None, ge=0)
    all: Optional[list["TraceRule"]] = Field(None, min_length=1)
    any: Optional[list["TraceRule"]] = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_shape(self) -> "TraceRule":
        combined = [k for k in ("all", "any") if getattr(self, k) is not None]
        if len(combined) > 1 or (combined and self.event is not None):
            raise ValueError("a rule is either a match (event = ...) or one of all = [...] / "
                             "any = [...], not both")
        if not combined and self.event is None:
            raise ValueError('give event = "tool_call", "message" or "final_message" '
                             "(or all = [...] / any = [...])")
        if self.event is not None and self.event != "tool_call" and (
                self.tool is not None or self.succeeded is not None):
            raise ValueError("tool and succeeded apply to event = \"tool_call\" only")
        if self.max_count is not None and "min_count" not in self.model_fields_set:
            self.min_count = min(self.min_count, self.max_count)  # max_count = 0: "never"
        if self.max_count is not None and self.max_count < self.min_count:
            raise ValueError("max_count is below min_count")
        return self


class CriterionSpec(_Strict):
    """One named criterion of a fixture.

    hidden: `checks` are globs over the hidden checks' names (the whole name, or the part
    after its last `::`); passed when every matching check that ran passed.
    trace: `rule` over the normalized trajectory.
    review: `field` names the rater outcome that scores it; null until rated."""

    name: str = Field(min_length=1, max_length=120, pattern=r"^[^\x00-\x1f\x7f]+$")
    kind: Literal["hidden", "trace", "review"]
    required: bool = True
    checks: Optional[list[str]] = Field(None, min_length=1)
    rule: Optional[TraceRule] = None
    field: Optional[Literal[REVIEW_FIELDS]] = None  # type: ignore[valid-type]
    description: Optional[str] = None

    @model_validator(mode="after")
    def _fits_kind(self) -> "CriterionSpec":
        wanted = {"hidden": "checks", "trace": "rule", "review": "field"}[self.kind]
        for key in ("checks", "rule", "field"):
            given = getattr(self, key) is not None
            if key == wanted and not given:
                example = {"checks": 'checks = ["test_install*"]',
                           "rule": 'rule = { event = "tool_call", tool = "skill" }',
                           "field": 'field = "human_accepted"'}[key]
                raise ValueError(f"a {self.kind} criterion needs {key} ({example})")
            if key != wanted and given:
                raise ValueError(f"{key} does not apply to a {self.kind} criterion")
        if self.kind == "review" and self.required:
            raise ValueError("a review criterion is scored by raters after the run, so it "
                             "cannot decide the run's outcome: set required = false")
        return self


def check_names(criteria: list[CriterionSpec]) -> Optional[str]:
    """Why a list of criteria is refused (a repeated name), or None."""
    seen: set[str] = set()
    for criterion in criteria:
        if criterion.name in seen:
            return f"criterion name '{criterion.name}' is used twice"
        seen.add(criterion.name)
    return None
