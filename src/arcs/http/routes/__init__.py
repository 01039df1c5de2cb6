"""The HTTP routes, one router per concept; ``arcs.http.api`` assembles them."""
