"""Model corpora: the hand-picked corpus (``models``) and the generated ones (every transformers, torchvision, timm and diffusers model a library can build offline)."""
