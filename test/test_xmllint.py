"""Check that package.xml and the robot descriptions are well-formed XML."""

import os
import shutil
import subprocess

from catkin_pkg.package import parse_package
import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XML_SUFFIXES = ('.urdf', '.sdf', '.xacro')

EXPECTED_EXEC_DEPENDS = {
    'rclpy', 'std_msgs', 'sensor_msgs', 'geometry_msgs', 'tf2_msgs',
    'rosgraph_msgs', 'std_srvs', 'trajectory_msgs', 'launch', 'launch_ros',
    'robot_state_publisher', 'python3-numpy', 'python3-scipy', 'python3-yaml',
}


def xml_files():
    """Return package.xml and every URDF/SDF/xacro file under urdf/."""
    files = [os.path.join(REPO_ROOT, 'package.xml')]
    for root, dirnames, filenames in os.walk(os.path.join(REPO_ROOT, 'urdf')):
        dirnames.sort()
        files.extend(
            os.path.join(root, name) for name in sorted(filenames)
            if name.endswith(XML_SUFFIXES))
    return files


@pytest.mark.linter
@pytest.mark.xmllint
@pytest.mark.parametrize(
    'path', xml_files(), ids=lambda p: os.path.relpath(p, REPO_ROOT))
def test_xmllint(path):
    xmllint = shutil.which('xmllint')
    assert xmllint is not None, (
        'xmllint not found: install it with `apt-get install -y libxml2-utils` '
        '(`make setup` does this)')
    result = subprocess.run(
        [xmllint, '--noout', path], capture_output=True, text=True, check=False)
    assert result.returncode == 0, \
        'xmllint rejected %s:\n%s' % (path, result.stderr)


def test_package_xml():
    package = parse_package(os.path.join(REPO_ROOT, 'package.xml'))
    package.validate()
    assert package.name == 'quasistatic_drake'
    assert package.package_format == 3
    exec_depends = {dep.name for dep in package.exec_depends}
    missing = EXPECTED_EXEC_DEPENDS - exec_depends
    assert not missing, 'package.xml lacks exec_depend: %s' % sorted(missing)
    build_types = [e.content for e in package.exports if e.tagname == 'build_type']
    assert build_types == ['ament_python']


def test_setup_py_matches_package_xml():
    """Check that setup.py and package.xml agree on the name and version."""
    package = parse_package(os.path.join(REPO_ROOT, 'package.xml'))
    with open(os.path.join(REPO_ROOT, 'setup.py')) as f:
        setup_py = f.read()
    assert "package_name = '%s'" % package.name in setup_py
    assert "version='%s'" % package.version in setup_py
