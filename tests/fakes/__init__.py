"""Local fake servers and recorders that speak the real wire formats of the systems Lookout talks to."""
