"""The limits that keep the ambassador answering, shared by its command (`server.py`, which
takes them as flags) and its gunicorn worker (`guarded_worker.py`, which reads them from the
environment it inherits) - a module of its own so the command does not import gunicorn to
build its parser."""

ENV_HEAD_TIMEOUT = "WORKQUEUE_AMBASSADOR_HEAD_TIMEOUT"
ENV_MAX_LINE = "WORKQUEUE_AMBASSADOR_MAX_REQUEST_LINE"
ENV_MAX_HEAD = "WORKQUEUE_AMBASSADOR_MAX_HEADER_BYTES"
DEFAULT_HEAD_TIMEOUT = 10.0  # nginx's client_header_timeout is 60 s; a head is a few hundred B
DEFAULT_MAX_LINE = 8190  # gunicorn's own ceiling for limit_request_line
DEFAULT_MAX_HEAD = 32 * 1024  # nginx's large_client_header_buffers: 4 x 8k
