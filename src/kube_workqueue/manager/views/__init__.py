"""What people see of a queue: one answer, several readers.

queue_view.py    where every item is, why, when it will run, and the forecast
item_view.py     one item as people see it: its state, and why it is there in words
schedule.py      the line's mean-value schedule: positions, predicted starts, the last idle slot
observe.py       the manager's Prometheus metrics, computed at scrape time
groups_view.py   the queue's tenants read back from the record: groups, what holds them
group_metrics.py the same as metrics, one series per group
dashboard/       the live page on the metrics port (model, page, static script and style)
stats_server.py  /metrics, /stats, /healthz and the dashboard; threaded_server.py serves
lab.py           `workqueue lab`: the workqueue under a firehose, live in the terminal
"""
