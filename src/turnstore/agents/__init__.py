"""The OpenAI Agents SDK's side: its Session, Runner hooks and the demo."""
