"""Install quasistatic_drake (ROS 2 ament_python package, also pip-installable)."""

from glob import glob
import os

from setuptools import find_packages
from setuptools import setup

package_name = 'quasistatic_drake'
here = os.path.dirname(os.path.abspath(__file__))


def share_files(directory, pattern='*', recursive=False):
    """
    List (install_dir, [files]) pairs installing directory into share/.

    Files matching pattern under directory (relative to this setup.py) go to
    share/quasistatic_drake/<directory>/..., keeping subdirectories when
    recursive is true.  Directories themselves are never listed.
    """
    entries = []
    if not os.path.isdir(os.path.join(here, directory)):
        return entries
    walk = os.walk(os.path.join(here, directory))
    for root, dirnames, _ in walk:
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(('.', '__')))
        rel_root = os.path.relpath(root, here)
        files = sorted(
            os.path.relpath(path, here)
            for path in glob(os.path.join(root, pattern))
            if os.path.isfile(path))
        if files:
            entries.append((os.path.join('share', package_name, rel_root), files))
        if not recursive:
            break
    return entries


setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={package_name: ['kernel_signatures.json']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        *share_files('launch', '*.launch.py'),
        *share_files('urdf', recursive=True),
        *share_files('config', '*.yaml'),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='quasistatic_drake maintainers',
    maintainer_email='maintainer@quasistatic-drake.dev',
    description='Drake-native quasistatic manipulation simulator with a ROS 2 bridge',
    license='Apache-2.0',
    python_requires='>=3.10',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'quasistatic-drake = quasistatic_drake.apps.cli:main',
            'quasistatic-drake-node = quasistatic_drake.ros.entry:main',
        ],
    },
)
