"""The application: what every face (the command line, the magics, the panel, the Jupyter server, the public
API) asks for, with the steps around it done once here.

``measure`` (plan -> execute -> join -> Report, with the kernel census, the request defaults and the postamble),
``cells`` (what measuring a notebook cell does beyond reading the magic's line), ``cell_code`` (the ``%%argus`` line
and the kernel code the JupyterLab panel runs), ``runs`` (which report a face shows), ``signals`` (the catalog as
faces list it, conflicts), ``importing``, ``exporting``, ``recovery`` (runs left behind by dead processes, handed to
the store), ``doctor`` (what this machine can measure), ``query`` (``argus_lab.sql``) and ``commands`` (an
``argus-lab`` command as printed).  A face parses, calls one function here and displays the answer.
"""
