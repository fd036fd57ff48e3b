"""The embedded stack: every part of the system as child processes of one launcher, on one machine."""
