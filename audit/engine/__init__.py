"""The engine layer: tasks and their seeds, the audit's units, memory, progress and the task store."""
