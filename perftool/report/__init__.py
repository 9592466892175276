"""Report formats, one module each; every report is a pure function of its inputs."""
