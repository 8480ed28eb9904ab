"""The client commands (`cronos jobs|runs|apply|token`): they talk to the REST API (or, for
tokens, the database) from an operator's shell. No role imports this package."""
