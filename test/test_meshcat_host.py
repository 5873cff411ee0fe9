"""
Meshcat listens on localhost unless asked (issue 31, defect 14).

Drake's default listens on every interface while the URL it logs says
localhost.  The listening socket's local address is read from /proc/net/tcp(6).
"""

from urllib.parse import urlparse

from quasistatic_drake.meshcat_server import make_meshcat
from quasistatic_drake.ros.params import node_params


def listening_addresses(port):
    """Return the local addresses (hex, as in /proc/net/tcp and tcp6) listening on ``port``."""
    found = set()
    for name in ('/proc/net/tcp', '/proc/net/tcp6'):
        with open(name) as table:
            next(table)
            for line in table:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(':')
                if state == '0A' and int(hex_port, 16) == port:      # 0A: LISTEN
                    found.add(address)
    return found


def test_meshcat_listens_on_localhost_only_by_default():
    meshcat = make_meshcat()
    port = urlparse(meshcat.web_url()).port
    assert listening_addresses(port) == {'0100007F'}          # 127.0.0.1


def test_meshcat_listens_everywhere_when_asked():
    meshcat = make_meshcat(host='*')
    addresses = listening_addresses(urlparse(meshcat.web_url()).port)
    assert addresses and all(set(a) == {'0'} for a in addresses)     # 0.0.0.0 or ::


def test_the_node_parameter_defaults_to_localhost():
    assert node_params({}).meshcat_host == 'localhost'
