"""The cost plan of an experiment: requests, tokens, dollars and wall time before any call."""

from evalkit.plan.estimate import Line, Plan, build_plan, plan_before_run
from evalkit.plan.table import render_plan, write_plan

__all__ = ["Line", "Plan", "build_plan", "plan_before_run", "render_plan", "write_plan"]
