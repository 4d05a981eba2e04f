"""Neutral helpers every stage may use: plain text of messages, token estimates, tool-call
vocabulary, summary templates, redaction, registries, worker pools and progress.

Nothing here imports a stage, the ground truth or the generator, so the offline stand-ins can use
it without grading themselves (the independence rule, ``.importlinter``)."""
