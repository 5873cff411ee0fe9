"""A Meshcat server that listens where it says it does (localhost unless asked)."""

from pydrake.geometry import Meshcat, MeshcatParams


def make_meshcat(port: int = 0, host: str = "localhost") -> Meshcat:
    """
    Return a Meshcat server on ``port`` (0: the first free from 7000), listening on ``host``.

    Drake's own default listens on every interface while the URL it logs
    says localhost; this machine only, unless asked ("*" or an address).
    """
    params = MeshcatParams()
    params.host = host
    if port:
        params.port = port
    return Meshcat(params)
