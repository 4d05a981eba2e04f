"""What the stages exchange: the experiment (config), the canonical session, the compaction
event, the tidy metrics table and run folders read back. Every stage imports these; these import
no stage (docs/contracts.md)."""
