"""Channel adapters: each translates its wire format to and from bot.messages, nothing more."""
