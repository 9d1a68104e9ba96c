"""What the families share: dtypes and tile helpers, native snippets, epilogues, elementwise kernels."""
