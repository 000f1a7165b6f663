"""Running tasks: the app and its task declarations, the context, workers."""
