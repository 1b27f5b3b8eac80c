"""The kinds of event on the simulation's calendar, in the order they run when they fall
at the same instant: a row on its way lands before anything acts on it, a death before its
detection, a detection before the host comes back, departures free room before arrivals
take it, and a sample sees the instant's end."""

PUBLISH, DOWN, DETECT, UP, DEPART, TAKEOVER, ARRIVE, RECREATE, SAMPLE = range(9)
