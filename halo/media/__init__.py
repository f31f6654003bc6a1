"""Media that comes with a message: voice notes, transcribed to text before the turn."""
