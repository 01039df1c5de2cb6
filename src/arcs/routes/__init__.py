"""The HTTP routes, one router per concept; ``arcs.api`` assembles them."""
