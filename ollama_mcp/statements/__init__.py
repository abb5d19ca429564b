"""Statements that change (no I/O): what a memory says about whom (``reading``: subject,
attribute, value, read from its words when it is stored) and, among everything said about one
subject's attribute, which statement is current and which ones it superseded (``chains``: worked
out when a search needs it, so a deleted memory mends its chain and an undo takes effect at once).
"""
