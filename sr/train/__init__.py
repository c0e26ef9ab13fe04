"""Training: the loop, checkpoints, step timing, validation and TensorBoard logging."""
