"""The call path: operands -> Problem (problem.py) -> Plan (plan.py, pure) -> launches (execute.py).
Imports ``kernels``, ``config`` and ``_compat``; never ``api`` or ``autograd``."""
