"""Passes over the model's weights that keep each one replaceable by ``apply_weights``: a weight
used transposed stored transposed (``transposes``), BatchNormalization's factors taken into the
Conv before it (``batchnorm_into_conv``), weights only moved and computed with exactly stored as
the result with a recipe to redo it (``recipes``); ``base`` holds what they share."""
