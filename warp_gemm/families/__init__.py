"""Kernel families, one folder each, and the registry the planner and the executor loop over.

``registry.REGISTRY`` is in planner order: ``core.plan`` asks each family's ``plan`` in turn and takes the first plan;
``core.execute`` runs the planned family's ``launches``. Adding a family is one folder (spec/rules, kernel,
native/*.cuh, launch) and one line here. Families import ``_compat``, ``config``, the lower half of ``core``
(operands, options, launches) and each other's public names; never ``core.plan``, ``core.execute`` or above.
"""
