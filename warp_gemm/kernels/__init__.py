"""Kernel families, one module each (see docs/design.md). Modules here import only ``_compat``,
``config`` and each other's ``common``; never ``core``, ``api`` or ``autograd``."""
