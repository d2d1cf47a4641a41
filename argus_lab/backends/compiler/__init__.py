"""The compiler-facts backend: the collector (:mod:`.collector`) and the facts it reads (:mod:`.facts`)."""
