"""kubesched.scheduler: the scheduling loop and its event handlers."""
