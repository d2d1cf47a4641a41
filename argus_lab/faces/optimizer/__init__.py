"""The optimisation loop's parts (the public face is :mod:`argus_lab.faces.optimize`, ``argus_lab.optimize``).

``candidates`` (candidates, spaces, budgets), ``evidence`` (what one candidate's evaluation holds), ``session``
(measuring candidates into the store), ``rules`` (the evidence-guided rule set), ``search`` (timing-only and
evidence-guided searches under one budget).
"""
