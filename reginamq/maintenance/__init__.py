"""Background work: retention and deduplication-key purging, run by one elected process."""
