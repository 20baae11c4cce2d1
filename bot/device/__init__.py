"""The pendant: WebSocket protocol, audio pipeline, local transcription."""
