"""What users touch: the one measure/plan facade (:mod:`.measure`), the command line (:mod:`.cli`), the IPython
magics (:mod:`.magics`), the ipywidgets signal panel (:mod:`.panel`) and the Jupyter server extension
(:mod:`.server`).  The most downstream stage: it may import every other."""
