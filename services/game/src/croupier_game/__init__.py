"""The game service: TableService (tables, seats, rounds, decisions) and AuditService (replay, void).

It owns the round streams: every round is an event stream (stream_type "round"), folded through
the rules library's deciders.
"""
