"""The ledger's rules: accounts, transfers and their entries, rounds. Pure: no I/O, no clock."""
