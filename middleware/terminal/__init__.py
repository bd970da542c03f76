"""What the command line shares: common options and the terminal timeline of a trace."""
