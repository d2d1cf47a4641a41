"""The Nsight Compute backend: the launcher (:mod:`.launcher`) and the report reader (:mod:`.parse`)."""
