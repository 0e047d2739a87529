"""Profiling and tuning jobs: create them, carry them to devices, collect what comes back."""
