"""The durable record of a queue in the cluster, and the `Ledger` port over it.

    record.py        outcomes in ConfigMaps, and the manager's facts
    batch_record.py  each batch's ConfigMap: its claim, then the record of its outcomes
    batch_data.py    that ConfigMap's data in both forms, and a batch as kept in memory
    hash_index.py    64-bit item hashes to where a batch holds them, ~20 bytes an entry
    ledger.py        `ClusterLedger`: the `Ledger` port over the Job cache and the record
    queue_wide.py    its settings (the control's) and its rows read whole, mixed into it

Above `client/` and `manifests/`; below `steering/` and `dispatch/`.
"""
