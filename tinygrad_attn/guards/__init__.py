"""What keeps a graph honest: in-place edit detection, anomaly mode, axis and shape validation, and
the labels their error messages use to name tensors and ops."""
