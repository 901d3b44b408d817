"""The team's order service: a consumer of the orders stream that keeps an order projection."""
