"""The rules: what is due, what a transition does, how buffered effects apply. No SQL text."""
