"""Summary templates the field uses, in one place (compactors ask for them, stand-ins fill them)."""

# The reference compactor's six sections (REFERENCES.md §1.A), with Progress's three subsections.
REFERENCE_TEMPLATE: tuple[str, ...] = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
)
