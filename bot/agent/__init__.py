"""The agent: router, bounded tool loop, LLM port, prompts and tools."""
