"""Pure parts of the SQS bridge: message shapes, routing by suffix, what to do with a result."""
