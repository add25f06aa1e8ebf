"""The caching allocator: its history over one cell (``cell``), its snapshot read into tables
(``snapshot``), and the names a user has for each block (``names``).
"""
