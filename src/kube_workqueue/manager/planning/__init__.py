"""The planning math, free of I/O: what the measured times are, and what they mean.

measure.py   the one definition of measured arrival and service times
scaling.py   Burns' stability rule and the M/M/c (Erlang C) and G/G/c queues behind it
simulate.py  a deterministic discrete-event simulation of the queue
deadline.py  how many workers a batch needs to meet a deadline (`workqueue plan`)
"""
