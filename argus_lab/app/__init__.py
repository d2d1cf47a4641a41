"""The application: what every face (the command line, the magics, the panel, the Jupyter server, the public
API) asks for, with the steps around it done once here.

``measure`` (plan -> execute -> join -> Report, with the kernel census, the request defaults and the hints),
``runs`` (which runs a command means when it names none, and the unknown-run check), ``importing``,
``exporting``, ``recovery`` (runs left behind by dead processes, handed to the store), ``doctor`` (what this
machine can measure), ``query`` (``argus_lab.sql``) and ``commands`` (an ``argus-lab`` command as printed).
"""
