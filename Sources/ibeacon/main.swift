// The CLI entry point is added with the first command.
