"""The faces of argus_lab: the one facade, the CLI, the magics, the panel (being moved here by issue 14)."""
