"""What the backend creates, as data: pure functions from options and items to manifests.

    objects.py        names, labels, the one-item Job and its ConfigMap
    pod_patch.py      a partial pod spec merged in, as a strategic merge patch would
    batch_objects.py  a batch's manifests: its Indexed Job and its ConfigMap
    pods.py           why a Job's pod is not running yet, in words
    validation.py     every flag's value checked as the API server would check it

The bottom layer with `client/`: no API call, no state.
"""
