"""experiments: a recorded run replayed offline, or forked at an iteration with another model (experiment).
"""
