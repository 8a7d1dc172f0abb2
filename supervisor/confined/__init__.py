"""confined: where the model's code runs, and how what it leaves is judged.

terrarium (the working copy, the capture of what a run left, the landing) runs everything through sandbox
(Landlock, namespaces, seccomp, limits) or a child forked by zygote from preloaded; gate judges a candidate with
check (the pytest plugin in the child), selection and source (which tests a change can affect, what a test may do),
evaluate and scoring (the person's score); blame observes the world outside the code. check.py, scoring.py,
preloaded.py and sandbox.py also run as programs, by their paths, in the children.
"""
