"""The HTTP routes of API.md, one router per concept; ``arcs.api`` assembles them."""
