"""What every layer may use: the errors that become 4xx/503 answers, the background loop, the
time formats of answers. Nothing here imports another part of reginamq."""
