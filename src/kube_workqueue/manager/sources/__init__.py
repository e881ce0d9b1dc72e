"""The source port's adapters (`manager.ports.Source`): where item names and data come from.

    http.py       the client of an ambassador's items API (`/api/v1/items`): `workqueue manager`
    source_calls.py  one GET of it with its retries; an answer that is not the API refused
    held_data.py  the data it holds for the items about to run, fetched a page at a time
    promised_data.py  a log's listed items' data, taken with the listing, held until settled
    folder.py     the ambassador's own folder source, in-process: `workqueue run DIR`

Only the edge (`manager.assembly`, `manager.cli`) picks one; the core sees the port.
"""
