"""The evidence model: what the store holds and what its rows mean, in one place, below every stage that reads or
writes it.

* :mod:`~argus_lab.model.schema`: the tables, their version and the migrations of older stores;
* :mod:`~argus_lab.model.views`: the store's views (the derived exact attributions, ``instance_values`` over the
  narrow value layout) and the value layout itself;
* :mod:`~argus_lab.model.columns`: how table columns travel from a run to the store (JSON columns, Arrow values);
* :mod:`~argus_lab.model.vocabulary`: the attribution classes and what each means;
* :mod:`~argus_lab.model.statuses`: the statuses a run ends with;
* :mod:`~argus_lab.model.asked`: which signals a run's request named (the join stores, and the report shows, only
  those);
* :mod:`~argus_lab.model.facts`: the ``compile.*`` signals and the ``kernel_facts`` columns they read;
* :mod:`~argus_lab.model.innermost`: which instance is innermost on a thread at a moment (the join and the
  importers place launches by it).

It imports nothing of argus_lab but :mod:`argus_lab.errors`; the store, the join and the report import it.
"""
