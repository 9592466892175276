"""The roofline: what each op computes and moves (:mod:`.families`, from its recorded shapes), the kernels it
launched (:mod:`.calls`), and how far below its device's peaks it runs (:mod:`.figures`)."""
