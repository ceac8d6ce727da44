"""Cost capture from OpenTelemetry spans: which spans belong to which episode, and the tokens
and model each one reports."""
