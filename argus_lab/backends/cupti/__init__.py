"""The CUPTI activity backend: the collector (:mod:`.collector`) and the bulk decode of its records (:mod:`.decode`)."""
