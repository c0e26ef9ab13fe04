"""sr: train and evaluate image super-resolution (SR) models with TensorFlow 2."""
