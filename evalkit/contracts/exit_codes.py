"""Exit codes, documented in the README: 0 ok, 1 gate failed, 2 usage or data error.

A contract with CI jobs, so the library (``decide.gate``) and the CLI read them from here; the
library never imports the CLI."""

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
