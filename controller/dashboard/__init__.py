"""The controller's built-in web dashboard: fleet overview, device pages, rollout progress."""
