"""Time-stepping formulations: each turns a ContactSet into one step's velocities."""
