"""Sessions written out and read back: exports and the rows they carry."""
