"""Target families, one package each: target schema and files, search space, rules, tables and
commands; each registers itself in the ``dse.families`` entry-point group (``family.py``)."""
