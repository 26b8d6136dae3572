"""sharesync: keep Delta Sharing tables in sync with your own Delta tables."""
