"""
Applications built on the library: the demos, the paper reproductions and the demo planner.

* :mod:`.cli`: the ``quasistatic-drake`` console script (``demo``, ``push``,
  ``paper-2d``, ``info``);
* :mod:`.pick_and_place`: the arm's pick-and-place task (``make demo``);
* :mod:`.planning`: differential IK over end-effector waypoints, the demo's planner;
* :mod:`.paper_2d`: Pang & Tedrake 2018, Sec. V-A, the 2D gripper and cylinder.

The library (``quasistatic_drake`` and its ``formulations`` and ``ros``
packages) imports nothing from here.
"""
