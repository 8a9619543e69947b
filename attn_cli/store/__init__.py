"""What attn keeps on disk and reads back: the per-user cache (:mod:`.cache`) in a folder
proven private and attn's (:mod:`.private`), entries signed and read back as typed data."""
