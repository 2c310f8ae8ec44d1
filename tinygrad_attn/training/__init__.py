"""Training a TinyTransformer on the toy tasks: the loop, the tasks, checkpoints, the run folder,
plots and the host-memory setting the train command uses. No printing: the commands report."""
