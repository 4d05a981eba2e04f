"""The cost plan of an experiment: requests, tokens, dollars and wall time before any call."""

from evalkit.pipeline.plan.estimate import Line, Plan, build_plan
from evalkit.pipeline.plan.table import plan_before_run, render_plan, write_plan

__all__ = ["Line", "Plan", "build_plan", "plan_before_run", "render_plan", "write_plan"]
